//! The files of an upload: where their bytes come from, read once for their size, hashes and
//! head, and read again by range when they are sent.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::PathBuf;

use sha1::Sha1;
use sha2::{Digest as _, Sha256};

use crate::error::HubError;

/// Bytes of a file's head the preupload call samples.
pub(crate) const SAMPLE: usize = 512;

/// Where a file's bytes come from.
#[derive(Debug, Clone)]
pub enum Content {
    /// A file on disk, read when it is uploaded.
    File(PathBuf),
    /// Bytes in memory (a generated card).
    Bytes(Vec<u8>),
}

/// One file to put in the repository.
#[derive(Debug, Clone)]
pub struct Upload {
    /// Its path in the repository (`releases/2024-09/data/test-00000-of-00001.parquet`).
    pub path_in_repo: String,
    /// Its bytes.
    pub content: Content,
}

/// A file ready to upload: its size, hashes and head.
pub(crate) struct Prepared {
    pub(crate) upload: Upload,
    pub(crate) size: u64,
    pub(crate) sha256: String,
    /// Git's blob id of the contents, which the Hub reports for files not in LFS.
    pub(crate) git_sha1: String,
    pub(crate) sample: Vec<u8>,
}

/// Reads `content` once, for its size, SHA-256, git blob id and first bytes.
pub(crate) fn prepare(upload: Upload) -> Result<Prepared, HubError> {
    let mut sha256 = Sha256::new();
    let mut bytes_seen = 0u64;
    let mut sample = Vec::new();
    let mut blob = Vec::new();
    let mut feed = |chunk: &[u8], blob_ok: bool| {
        sha256.update(chunk);
        if sample.len() < SAMPLE {
            let take = (SAMPLE - sample.len()).min(chunk.len());
            sample.extend_from_slice(&chunk[..take]);
        }
        if blob_ok {
            blob.extend_from_slice(chunk);
        }
        bytes_seen += chunk.len() as u64;
    };
    match &upload.content {
        Content::Bytes(bytes) => feed(bytes, true),
        Content::File(path) => {
            let io = |e: std::io::Error| HubError::Io {
                path: path.clone(),
                message: e.to_string(),
            };
            let mut file = std::fs::File::open(path).map_err(io)?;
            let small = file.metadata().map_err(io)?.len() <= 10 << 20;
            let mut buffer = vec![0u8; 1 << 20];
            loop {
                let n = file.read(&mut buffer).map_err(io)?;
                if n == 0 {
                    break;
                }
                feed(&buffer[..n], small);
            }
        }
    }
    // The blob id is only compared for files the Hub keeps in git (small ones).
    let git_sha1 = if blob.len() as u64 == bytes_seen {
        let mut sha1 = Sha1::new();
        sha1.update(format!("blob {bytes_seen}\0").as_bytes());
        sha1.update(&blob);
        kiln_core::config::hex(&sha1.finalize())
    } else {
        String::new()
    };
    Ok(Prepared {
        upload,
        size: bytes_seen,
        sha256: kiln_core::config::hex(&sha256.finalize()),
        git_sha1,
        sample,
    })
}

/// Bytes `offset..offset + len` of a file (all of it with `len = u64::MAX`).
pub(crate) fn read_range(content: &Content, offset: u64, len: u64) -> Result<Vec<u8>, HubError> {
    match content {
        Content::Bytes(bytes) => {
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            let end = usize::try_from(offset.saturating_add(len))
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            Ok(bytes[start..end].to_vec())
        }
        Content::File(path) => {
            let io = |e: std::io::Error| HubError::Io {
                path: path.clone(),
                message: e.to_string(),
            };
            let mut file = std::fs::File::open(path).map_err(io)?;
            file.seek(SeekFrom::Start(offset)).map_err(io)?;
            let mut out = Vec::new();
            file.take(len).read_to_end(&mut out).map_err(io)?;
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_blob_ids_and_hashes_match_git() {
        let prepared = prepare(Upload {
            path_in_repo: "a".into(),
            content: Content::Bytes(b"hello\n".to_vec()),
        })
        .unwrap();
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            prepared.git_sha1,
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(
            prepared.sha256,
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        assert_eq!(prepared.size, 6);
        assert_eq!(prepared.sample, b"hello\n");
    }

    #[test]
    fn ranges_of_bytes() {
        let content = Content::Bytes(b"abcdef".to_vec());
        assert_eq!(read_range(&content, 2, 3).unwrap_or_default(), b"cde");
        assert_eq!(read_range(&content, 4, 10).unwrap_or_default(), b"ef");
        assert_eq!(read_range(&content, 9, 1).unwrap_or_default(), b"");
    }
}
