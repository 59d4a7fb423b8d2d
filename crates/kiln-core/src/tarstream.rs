//! A tar archive read as it arrives, chunk by chunk, without holding it whole: what the engine
//! streams out of a container (`GET /containers/{id}/archive`) can be gigabytes of build
//! output, of which kiln reads the names and, for some entries, the bytes.
//!
//! Reads ustar and GNU headers, GNU long names (`L`, `K`) and PAX extended headers (`x`: `path`,
//! `linkpath`, `size`), which the engines write for long paths.

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A symbolic link to this target.
    Symlink(String),
    /// A hard link to this earlier entry of the archive.
    HardLink(String),
    /// A directory.
    Directory,
    /// Anything else (devices, fifos).
    Other,
}

/// One entry's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its path in the archive, without a leading `./` or trailing `/`.
    pub path: String,
    /// What it is.
    pub kind: EntryKind,
    /// Its mode bits.
    pub mode: u32,
    /// Bytes of data that follow.
    pub size: u64,
}

/// What the reader is told, in archive order.
pub trait Visitor {
    /// An entry begins; return whether its bytes are wanted ([`Visitor::data`]).
    fn entry(&mut self, entry: &Entry) -> bool;
    /// The next bytes of the current entry, when wanted.
    fn data(&mut self, bytes: &[u8]);
    /// The current entry ended (after all of its data).
    fn end(&mut self);
}

#[derive(Debug)]
enum State {
    /// Reading a 512-byte header.
    Header,
    /// Reading an entry's data (and the padding after it).
    Data {
        remaining: u64,
        padding: u64,
        wanted: bool,
    },
    /// Reading a long name or PAX record block into `extension`.
    Extension {
        remaining: u64,
        padding: u64,
        kind: u8,
    },
    /// Two zero blocks were read: the archive ended.
    Done,
}

/// The push reader.
#[derive(Debug)]
pub struct Reader {
    state: State,
    block: Vec<u8>,
    extension: Vec<u8>,
    /// A long name or PAX path for the next entry.
    next_path: Option<String>,
    next_link: Option<String>,
    next_size: Option<u64>,
}

impl Default for Reader {
    fn default() -> Self {
        Self::new()
    }
}

fn octal(field: &[u8]) -> u64 {
    // GNU base-256 for sizes over 8 GiB.
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        return field[1..].iter().fold(0u64, |n, b| {
            n.saturating_mul(256).saturating_add(u64::from(*b))
        });
    }
    let text: String = field
        .iter()
        .take_while(|b| **b != 0)
        .map(|b| char::from(*b))
        .collect();
    u64::from_str_radix(text.trim(), 8).unwrap_or(0)
}

fn text(field: &[u8]) -> String {
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

fn clean(path: &str) -> String {
    let path = path.strip_prefix("./").unwrap_or(path);
    path.trim_end_matches('/').to_string()
}

fn padding(size: u64) -> u64 {
    (512 - size % 512) % 512
}

impl Reader {
    /// A reader at the start of an archive.
    #[must_use]
    pub fn new() -> Self {
        Self {
            state: State::Header,
            block: Vec::with_capacity(512),
            extension: Vec::new(),
            next_path: None,
            next_link: None,
            next_size: None,
        }
    }

    /// Whether the archive's end marker was read.
    #[must_use]
    pub fn done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Reads the next bytes of the archive.
    ///
    /// # Errors
    /// When a header is malformed (its checksum does not add up).
    pub fn push(&mut self, mut bytes: &[u8], visitor: &mut dyn Visitor) -> Result<(), String> {
        while !bytes.is_empty() {
            match &mut self.state {
                State::Done => return Ok(()),
                State::Header => {
                    let take = (512 - self.block.len()).min(bytes.len());
                    self.block.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if self.block.len() == 512 {
                        let block = std::mem::take(&mut self.block);
                        self.header(&block, visitor)?;
                    }
                }
                State::Data {
                    remaining,
                    padding,
                    wanted,
                } => {
                    if *remaining > 0 {
                        let take = usize::try_from(*remaining)
                            .unwrap_or(usize::MAX)
                            .min(bytes.len());
                        if *wanted {
                            visitor.data(&bytes[..take]);
                        }
                        *remaining -= take as u64;
                        bytes = &bytes[take..];
                        if *remaining == 0 {
                            visitor.end();
                        }
                    } else {
                        let take = usize::try_from(*padding)
                            .unwrap_or(usize::MAX)
                            .min(bytes.len());
                        *padding -= take as u64;
                        bytes = &bytes[take..];
                    }
                    if let State::Data {
                        remaining: 0,
                        padding: 0,
                        ..
                    } = self.state
                    {
                        self.state = State::Header;
                    }
                }
                State::Extension {
                    remaining,
                    padding,
                    kind,
                } => {
                    let kind = *kind;
                    if *remaining > 0 {
                        let take = usize::try_from(*remaining)
                            .unwrap_or(usize::MAX)
                            .min(bytes.len());
                        // A name is short; a PAX block holds a few records. Cap what is kept.
                        if self.extension.len() < 1 << 20 {
                            self.extension.extend_from_slice(&bytes[..take]);
                        }
                        *remaining -= take as u64;
                        bytes = &bytes[take..];
                    } else {
                        let take = usize::try_from(*padding)
                            .unwrap_or(usize::MAX)
                            .min(bytes.len());
                        *padding -= take as u64;
                        bytes = &bytes[take..];
                    }
                    if let State::Extension {
                        remaining: 0,
                        padding: 0,
                        ..
                    } = self.state
                    {
                        self.extended(kind);
                        self.state = State::Header;
                    }
                }
            }
        }
        Ok(())
    }

    fn extended(&mut self, kind: u8) {
        let data = std::mem::take(&mut self.extension);
        match kind {
            b'L' => self.next_path = Some(text(&data)),
            b'K' => self.next_link = Some(text(&data)),
            b'x' => {
                // Records: `<length> <key>=<value>\n`.
                let mut rest = data.as_slice();
                while let Some(space) = rest.iter().position(|b| *b == b' ') {
                    let length: usize = std::str::from_utf8(&rest[..space])
                        .ok()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    if length <= space || length > rest.len() {
                        break;
                    }
                    let record = &rest[space + 1..length];
                    let record = record.strip_suffix(b"\n").unwrap_or(record);
                    if let Some(eq) = record.iter().position(|b| *b == b'=') {
                        let key = &record[..eq];
                        let value = String::from_utf8_lossy(&record[eq + 1..]).into_owned();
                        match key {
                            b"path" => self.next_path = Some(value),
                            b"linkpath" => self.next_link = Some(value),
                            b"size" => self.next_size = value.parse().ok(),
                            _ => {}
                        }
                    }
                    rest = &rest[length..];
                }
            }
            _ => {}
        }
    }

    fn header(&mut self, block: &[u8], visitor: &mut dyn Visitor) -> Result<(), String> {
        if block.iter().all(|b| *b == 0) {
            // One zero block ends the archive for kiln (the second one adds nothing).
            self.state = State::Done;
            return Ok(());
        }
        let recorded = octal(&block[148..156]);
        let sum: u64 = block
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if (148..156).contains(&i) {
                    u64::from(b' ')
                } else {
                    u64::from(*b)
                }
            })
            .sum();
        if recorded != sum {
            return Err("a tar header's checksum does not add up".into());
        }
        let kind = block[156];
        let size = octal(&block[124..136]);
        if matches!(kind, b'L' | b'K' | b'x' | b'g') {
            self.state = State::Extension {
                remaining: size,
                padding: padding(size),
                kind,
            };
            if size == 0 {
                self.extended(kind);
                self.state = State::Header;
            }
            return Ok(());
        }
        let name = text(&block[0..100]);
        let prefix = if &block[257..262] == b"ustar" {
            text(&block[345..500])
        } else {
            String::new()
        };
        let joined = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let path = clean(&self.next_path.take().unwrap_or(joined));
        let link = self
            .next_link
            .take()
            .unwrap_or_else(|| text(&block[157..257]));
        let size = self.next_size.take().unwrap_or(size);
        let entry_kind = match kind {
            b'0' | 0 | b'7' => EntryKind::File,
            b'1' => EntryKind::HardLink(clean(&link)),
            b'2' => EntryKind::Symlink(link),
            b'5' => EntryKind::Directory,
            _ => EntryKind::Other,
        };
        // Only regular files carry data (a hard link's size is 0).
        let size = if entry_kind == EntryKind::File {
            size
        } else {
            0
        };
        let entry = Entry {
            path,
            kind: entry_kind,
            mode: u32::try_from(octal(&block[100..108])).unwrap_or(0),
            size,
        };
        let wanted = visitor.entry(&entry);
        if size == 0 {
            visitor.end();
            self.state = State::Header;
        } else {
            self.state = State::Data {
                remaining: size,
                padding: padding(size),
                wanted,
            };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect {
        entries: Vec<(Entry, Vec<u8>)>,
    }

    impl Visitor for Collect {
        fn entry(&mut self, entry: &Entry) -> bool {
            self.entries.push((entry.clone(), Vec::new()));
            entry.path.ends_with(".txt")
        }
        fn data(&mut self, bytes: &[u8]) {
            if let Some((_, data)) = self.entries.last_mut() {
                data.extend_from_slice(bytes);
            }
        }
        fn end(&mut self) {}
    }

    #[test]
    fn entries_arrive_whatever_the_chunking() {
        let long = format!("testbed/{}/deep.txt", "d".repeat(150));
        let mut builder = tar::Builder::new(Vec::new());
        let mut add = |path: &str, content: &[u8]| {
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, path, content).unwrap();
        };
        add("testbed/a.txt", b"hello\n");
        add(&long, &[7u8; 1500]);
        add("testbed/skip.bin", &[1u8; 700]);
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        header.set_cksum();
        builder
            .append_link(&mut header, "testbed/conftest.py", "src/plugin.py")
            .unwrap();
        let archive = builder.into_inner().unwrap();
        for chunk in [1, 7, 511, 512, 513, 4096, archive.len()] {
            let mut reader = Reader::new();
            let mut seen = Collect::default();
            for piece in archive.chunks(chunk) {
                reader.push(piece, &mut seen).unwrap();
            }
            assert!(reader.done(), "chunk {chunk}");
            let paths: Vec<&str> = seen.entries.iter().map(|(e, _)| e.path.as_str()).collect();
            assert_eq!(
                paths,
                [
                    "testbed/a.txt",
                    long.as_str(),
                    "testbed/skip.bin",
                    "testbed/conftest.py"
                ],
                "chunk {chunk}"
            );
            assert_eq!(seen.entries[0].1, b"hello\n");
            assert_eq!(seen.entries[1].1, vec![7u8; 1500]);
            assert!(seen.entries[2].1.is_empty());
            assert_eq!(
                seen.entries[3].0.kind,
                EntryKind::Symlink("src/plugin.py".into())
            );
        }
        let mut broken = archive.clone();
        broken[10] ^= 0xff;
        assert!(
            Reader::new()
                .push(&broken, &mut Collect::default())
                .is_err()
        );
    }
}
