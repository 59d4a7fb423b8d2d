//! Reading C/C++ build files: the library names they ask for mapped to Debian packages, the
//! files to read, and the arguments of their calls (`find_package(...)`).

use std::path::{Path, PathBuf};

/// Names of libraries in build files, mapped to the Debian packages that provide them. `None`
/// for what needs no package (threads, the image's own test frameworks, build tools).
const PACKAGES: &[(&str, Option<&str>)] = &[
    ("zlib", Some("zlib1g-dev")),
    ("z", Some("zlib1g-dev")),
    ("openssl", Some("libssl-dev")),
    ("ssl", Some("libssl-dev")),
    ("crypto", Some("libssl-dev")),
    ("libssl", Some("libssl-dev")),
    ("libcrypto", Some("libssl-dev")),
    ("curl", Some("libcurl4-openssl-dev")),
    ("libcurl", Some("libcurl4-openssl-dev")),
    ("threads", None),
    ("pthread", None),
    ("openmp", None),
    ("m", None),
    ("dl", None),
    ("gtest", None),
    ("googletest", None),
    ("gmock", None),
    ("gtest_main", None),
    ("catch2", None),
    ("doctest", None),
    ("pkgconfig", None),
    ("git", None),
    ("doxygen", None),
    ("boost", Some("libboost-all-dev")),
    ("png", Some("libpng-dev")),
    ("libpng", Some("libpng-dev")),
    ("jpeg", Some("libjpeg-dev")),
    ("libjpeg", Some("libjpeg-dev")),
    ("sqlite3", Some("libsqlite3-dev")),
    ("sqlite", Some("libsqlite3-dev")),
    ("fmt", Some("libfmt-dev")),
    ("spdlog", Some("libspdlog-dev")),
    ("eigen3", Some("libeigen3-dev")),
    ("nlohmann_json", Some("nlohmann-json3-dev")),
    ("yaml-cpp", Some("libyaml-cpp-dev")),
    ("yaml-0.1", Some("libyaml-dev")),
    ("protobuf", Some("libprotobuf-dev protobuf-compiler")),
    ("glib-2.0", Some("libglib2.0-dev")),
    ("gobject-2.0", Some("libglib2.0-dev")),
    ("gio-2.0", Some("libglib2.0-dev")),
    ("gtk+-3.0", Some("libgtk-3-dev")),
    ("libxml-2.0", Some("libxml2-dev")),
    ("libxml2", Some("libxml2-dev")),
    ("expat", Some("libexpat1-dev")),
    ("bzip2", Some("libbz2-dev")),
    ("bz2", Some("libbz2-dev")),
    ("liblzma", Some("liblzma-dev")),
    ("lzma", Some("liblzma-dev")),
    ("zstd", Some("libzstd-dev")),
    ("libzstd", Some("libzstd-dev")),
    ("lz4", Some("liblz4-dev")),
    ("liblz4", Some("liblz4-dev")),
    ("libpcre", Some("libpcre3-dev")),
    ("pcre2", Some("libpcre2-dev")),
    ("libpcre2-8", Some("libpcre2-dev")),
    ("curses", Some("libncurses-dev")),
    ("ncurses", Some("libncurses-dev")),
    ("readline", Some("libreadline-dev")),
    ("libffi", Some("libffi-dev")),
    ("uuid", Some("uuid-dev")),
    ("x11", Some("libx11-dev")),
    ("sdl2", Some("libsdl2-dev")),
    ("opengl", Some("libgl-dev")),
    ("glfw3", Some("libglfw3-dev")),
    ("freetype", Some("libfreetype-dev")),
    ("freetype2", Some("libfreetype-dev")),
    ("harfbuzz", Some("libharfbuzz-dev")),
    ("cairo", Some("libcairo2-dev")),
    ("libevent", Some("libevent-dev")),
    ("libuv", Some("libuv1-dev")),
    ("benchmark", Some("libbenchmark-dev")),
    ("python3", Some("python3-dev")),
    ("python", Some("python3-dev")),
    ("pythonlibs", Some("python3-dev")),
    ("libusb-1.0", Some("libusb-1.0-0-dev")),
    ("dbus-1", Some("libdbus-1-dev")),
    ("libsystemd", Some("libsystemd-dev")),
    ("tbb", Some("libtbb-dev")),
    ("mpi", Some("libopenmpi-dev")),
    ("blas", Some("libopenblas-dev")),
    ("lapack", Some("liblapack-dev")),
    ("hdf5", Some("libhdf5-dev")),
    ("gmp", Some("libgmp-dev")),
    ("mpfr", Some("libmpfr-dev")),
    ("libarchive", Some("libarchive-dev")),
    ("icu", Some("libicu-dev")),
    ("icu-uc", Some("libicu-dev")),
    ("cmocka", Some("libcmocka-dev")),
    ("check", Some("check")),
    ("cunit", Some("libcunit1-dev")),
    ("absl", Some("libabsl-dev")),
    ("json-c", Some("libjson-c-dev")),
    ("jansson", Some("libjansson-dev")),
    ("sodium", Some("libsodium-dev")),
    ("libsodium", Some("libsodium-dev")),
    ("qt5", Some("qtbase5-dev")),
    ("libunwind", Some("libunwind-dev")),
    ("libcap", Some("libcap-dev")),
    ("libseccomp", Some("libseccomp-dev")),
];

/// The Debian package for a library name from a build file: exact (case-insensitive), then
/// without a `lib` prefix. The outer `None` means the name is unknown.
pub fn package_for(name: &str) -> Option<Option<&'static str>> {
    let name = name.to_ascii_lowercase();
    let look = |n: &str| PACKAGES.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
    look(&name).or_else(|| name.strip_prefix("lib").and_then(look))
}

/// Directories not searched for build files: VCS data, build output, vendored third-party
/// trees (their needs are the project's only if it builds them, which the top files say).
fn skipped_dir(name: &str) -> bool {
    name.starts_with('.')
        || matches!(
            name,
            "build"
                | "build-kiln"
                | "node_modules"
                | "third_party"
                | "third-party"
                | "3rdparty"
                | "vendor"
                | "external"
                | "extern"
                | "deps"
        )
}

/// Files under `root` (to depth 4, at most 400) whose names satisfy `wanted`.
pub fn find_files(root: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name().to_string_lossy().to_string();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if depth < 4 && !skipped_dir(&name) {
                    stack.push((entry.path(), depth + 1));
                }
            } else if wanted(&name) {
                out.push(entry.path());
                if out.len() >= 400 {
                    return out;
                }
            }
        }
    }
    out.sort();
    out
}

/// The words inside the parentheses of each `call(` in `text` (case-insensitive call name),
/// with quotes and brackets removed.
pub fn call_args(text: &str, call: &str) -> Vec<Vec<String>> {
    let lower = text.to_ascii_lowercase();
    let needle = format!("{}(", call.to_ascii_lowercase());
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = lower[from..].find(&needle) {
        let start = from + found;
        from = start + needle.len();
        // Only whole identifiers: `xfind_package(` is not `find_package(`.
        if start > 0
            && lower[..start]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &text[from..];
        let end = rest.find(')').unwrap_or(rest.len());
        let words = rest[..end]
            .split(|c: char| c.is_whitespace() || c == ',')
            .map(|w| w.trim_matches(['\'', '"', '[', ']']).to_string())
            .filter(|w| !w.is_empty())
            .collect();
        out.push(words);
    }
    out
}
