//! Git submodules that could not be fetched (their host is unreachable, the URL is relative to
//! a fork): what stands in for each, and how the build is told to use it.
//!
//! A stand-in is a Debian package, found from the submodule's directory name or from the
//! pkg-config, `find_package` and library probes of the build files that name the same
//! library. The build is then switched to the system copy where it offers a switch
//! (`-DUSE_SYSTEM_FMT=ON`, `--with-system-zlib`), and an autotools or make build that recurses
//! into the empty directory gets a stub Makefile there, so that it does not stop at
//! `No rule to make target 'all'`.

use std::path::Path;

use super::build_files::{call_args, package_for};

/// Submodule directory names (the last path component, lower-case) of libraries whose Debian
/// package is named differently from the library.
const SUBMODULE_PACKAGES: &[(&str, Option<&str>)] = &[
    ("json", Some("nlohmann-json3-dev")),
    ("nlohmann_json", Some("nlohmann-json3-dev")),
    ("pybind11", Some("pybind11-dev")),
    ("eigen", Some("libeigen3-dev")),
    ("eigen3", Some("libeigen3-dev")),
    ("abseil-cpp", Some("libabsl-dev")),
    ("rapidjson", Some("rapidjson-dev")),
    ("glm", Some("libglm-dev")),
    ("cxxopts", Some("libcxxopts-dev")),
    ("cli11", Some("libcli11-dev")),
    ("tinyxml2", Some("libtinyxml2-dev")),
    ("gflags", Some("libgflags-dev")),
    ("glog", Some("libgoogle-glog-dev")),
    ("cjson", Some("libcjson-dev")),
    ("openssl", Some("libssl-dev")),
    ("boringssl", Some("libssl-dev")),
    ("curl", Some("libcurl4-openssl-dev")),
    ("zlib", Some("zlib1g-dev")),
    ("zstd", Some("libzstd-dev")),
    ("lz4", Some("liblz4-dev")),
    ("xz", Some("liblzma-dev")),
    ("bzip2", Some("libbz2-dev")),
    ("brotli", Some("libbrotli-dev")),
    ("snappy", Some("libsnappy-dev")),
    ("libuv", Some("libuv1-dev")),
    ("libevent", Some("libevent-dev")),
    ("spdlog", Some("libspdlog-dev")),
    ("yaml-cpp", Some("libyaml-cpp-dev")),
    ("libyaml", Some("libyaml-dev")),
    ("protobuf", Some("libprotobuf-dev protobuf-compiler")),
    ("grpc", Some("libgrpc++-dev protobuf-compiler-grpc")),
    (
        "flatbuffers",
        Some("libflatbuffers-dev flatbuffers-compiler"),
    ),
    ("capstone", Some("libcapstone-dev")),
    ("libffi", Some("libffi-dev")),
    ("pcre2", Some("libpcre2-dev")),
    ("sqlite", Some("libsqlite3-dev")),
    ("lua", Some("liblua5.4-dev")),
    ("libgit2", Some("libgit2-dev")),
    ("msgpack-c", Some("libmsgpack-dev")),
    ("benchmark", Some("libbenchmark-dev")),
    ("googletest", None),
    ("gtest", None),
    ("catch2", None),
    ("catch", None),
    ("doctest", None),
];

/// What stands in for a missing submodule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StandIn {
    /// These Debian packages (space-separated).
    Package(&'static str),
    /// The image has the library (GoogleTest, Catch2, doctest).
    Image,
    /// Nothing known.
    Nothing,
}

/// A submodule missing from the checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submodule {
    /// Its path in the repository.
    pub path: String,
    /// What stands in.
    pub stand_in: StandIn,
    /// The probe of the build files that found the package, when the directory name did not.
    pub probe: Option<String>,
    /// Configure arguments that switch the build to the system copy (`-DFMT_SYSTEM=ON`,
    /// `--with-system-zlib`).
    pub switches: Vec<String>,
    /// A Makefile of the build lists the directory in `SUBDIRS`, so it gets a stub Makefile.
    pub stub_makefile: bool,
}

impl Submodule {
    /// How the version reason describes it.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut text = match &self.stand_in {
            StandIn::Package(p) => match &self.probe {
                Some(probe) => format!("{}: Debian {p} (the build probes `{probe}`)", self.path),
                None => format!("{}: Debian {p}", self.path),
            },
            StandIn::Image => format!("{}: the image's copy", self.path),
            StandIn::Nothing => format!("{}: no Debian package known", self.path),
        };
        if !self.switches.is_empty() {
            text.push_str(&format!(", configured with {}", self.switches.join(" ")));
        }
        if self.stub_makefile {
            text.push_str(", a stub Makefile in the empty directory");
        }
        text
    }
}

/// Lower-case, without a `lib` prefix, separators or a version suffix: `libFoo-2` and
/// `foo2` and `FOO` compare equal.
fn normalise(name: &str) -> String {
    let lower = name.trim_end_matches(".git").to_ascii_lowercase();
    let lower = lower.strip_prefix("lib").unwrap_or(&lower);
    let kept: String = lower.chars().filter(char::is_ascii_alphanumeric).collect();
    kept.trim_end_matches(|c: char| c.is_ascii_digit())
        .to_string()
}

/// The Debian package for a submodule directory, from its name, else from a probe of the
/// build files that names the same library.
fn package_of(path: &str, probes: &[String]) -> (StandIn, Option<String>) {
    let name = path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path)
        .trim_end_matches(".git")
        .to_ascii_lowercase();
    let known = SUBMODULE_PACKAGES
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| *v)
        .or_else(|| package_for(&name));
    let stand_in = |v: Option<&'static str>| match v {
        Some(p) => StandIn::Package(p),
        None => StandIn::Image,
    };
    if let Some(v) = known {
        return (stand_in(v), None);
    }
    let wanted = normalise(&name);
    if wanted.len() >= 2 {
        for probe in probes {
            if normalise(probe) == wanted
                && let Some(v) = package_for(probe)
            {
                return (stand_in(v), Some(probe.clone()));
            }
        }
    }
    (StandIn::Nothing, None)
}

/// Words of a switch name that mean "use the system copy" when ON, and those that mean "use
/// the bundled copy" (then turned OFF).
const SYSTEM_WORDS: &[&str] = &["SYSTEM", "EXTERNAL", "SHARED_LIBS_FROM_SYSTEM", "FIND"];
const BUNDLED_WORDS: &[&str] = &["BUNDLED", "VENDORED", "INTERNAL", "BUILTIN", "EMBEDDED"];

/// CMake `option()`s of the top CMakeLists that switch library `name` between the system and
/// the bundled copy, as `-D` arguments.
fn cmake_switches(top_cmake: &str, name: &str) -> Vec<String> {
    let wanted = normalise(name);
    let mut out = Vec::new();
    for words in call_args(top_cmake, "option") {
        let Some(option) = words.first() else {
            continue;
        };
        let upper = option.to_ascii_uppercase();
        let parts: Vec<&str> = upper.split('_').collect();
        if !parts.iter().any(|p| normalise(p) == wanted) {
            continue;
        }
        if SYSTEM_WORDS.iter().any(|w| upper.contains(w)) {
            out.push(format!("-D{option}=ON"));
        } else if BUNDLED_WORDS.iter().any(|w| upper.contains(w)) {
            out.push(format!("-D{option}=OFF"));
        }
    }
    out
}

/// The `--with-`/`--enable-` options an autotools build declares, as (`with` or `enable`, the
/// option's name): the `AC_ARG_WITH` and `AC_ARG_ENABLE` calls of `configure_ac` (with the
/// project's own macro files), and the options the generated `configure` script's help lists
/// (`  --with-system-zlib`, `  --disable-bundled-fmt`), which also holds those that macros
/// from elsewhere declare: what `configure --help` prints.
fn autotools_options(configure_ac: &str, configure: &str) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = Vec::new();
    for (call, flag) in [("AC_ARG_WITH", "with"), ("AC_ARG_ENABLE", "enable")] {
        for words in call_args(configure_ac, call) {
            if let Some(option) = words.into_iter().next() {
                out.push((flag, option));
            }
        }
    }
    for line in configure.lines() {
        let Some(rest) = line.trim_start().strip_prefix("--") else {
            continue;
        };
        // Help lines are indented and the option is followed by blanks, `=` or `[`.
        if !line.starts_with(' ') {
            continue;
        }
        let word: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        let (flag, option) = match word.split_once('-') {
            Some(("with" | "without", option)) => ("with", option),
            Some(("enable" | "disable", option)) => ("enable", option),
            _ => continue,
        };
        if !option.is_empty() && !out.iter().any(|(f, o)| *f == flag && o == option) {
            out.push((flag, option.to_string()));
        }
    }
    out
}

/// Options of an autotools build (see [`autotools_options`]) that pick the system copy of
/// library `name` (`--with-system-zlib`, `--with-zlib=yes`, `--enable-system-zlib`,
/// `--disable-bundled-zlib`).
fn autotools_switches(options: &[(&'static str, String)], name: &str) -> Vec<String> {
    let wanted = normalise(name);
    let mut out = Vec::new();
    for (flag, option) in options {
        let parts: Vec<&str> = option.split(['-', '_']).collect();
        if !parts.iter().any(|p| normalise(p) == wanted) {
            continue;
        }
        let lower = option.to_ascii_lowercase();
        let switch = if lower.contains("system") || lower.contains("external") {
            format!("--{flag}-{option}")
        } else if lower.contains("bundled") || lower.contains("internal") {
            format!(
                "--{}-{option}",
                if *flag == "with" {
                    "without"
                } else {
                    "disable"
                }
            )
        } else if *flag == "with" && normalise(option) == wanted {
            format!("--with-{option}=yes")
        } else {
            continue;
        };
        if !out.contains(&switch) {
            out.push(switch);
        }
    }
    out
}

/// Whether a `Makefile.am` or `Makefile` under `root` names `path` (relative to its own
/// directory) in `SUBDIRS`.
fn in_subdirs(root: &Path, path: &str) -> bool {
    let mut dir = Path::new(path);
    while let Some(parent) = dir.parent() {
        let relative = Path::new(path)
            .strip_prefix(parent)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        for file in ["Makefile.am", "Makefile"] {
            let Ok(text) = std::fs::read_to_string(root.join(parent).join(file)) else {
                continue;
            };
            let mut inside = false;
            for line in text.lines() {
                let trimmed = line.trim();
                let words: &str = if let Some(rest) = trimmed
                    .strip_prefix("SUBDIRS")
                    .or_else(|| trimmed.strip_prefix("DIST_SUBDIRS"))
                {
                    rest.trim_start_matches([' ', '+', ':', '=', '\t'])
                } else if inside {
                    trimmed
                } else {
                    continue;
                };
                if words
                    .split_whitespace()
                    .any(|w| w.trim_end_matches('/') == relative)
                {
                    return true;
                }
                inside = trimmed.ends_with('\\');
            }
        }
        dir = parent;
    }
    false
}

/// The submodules of `.gitmodules` that are missing from the checkout at `root` (absent or
/// empty directories), with their stand-ins. `configure_ac` is the autotools input; the
/// project's macro files (`acinclude.m4`, `m4/*.m4`) and a generated `configure` at the root
/// are read here.
#[must_use]
pub fn missing(
    root: &Path,
    probes: &[String],
    top_cmake: &str,
    configure_ac: &str,
) -> Vec<Submodule> {
    let Ok(text) = std::fs::read_to_string(root.join(".gitmodules")) else {
        return Vec::new();
    };
    let mut macros = configure_ac.to_string();
    let mut macro_files = vec![root.join("acinclude.m4")];
    if let Ok(entries) = std::fs::read_dir(root.join("m4")) {
        let mut found: Vec<std::path::PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "m4"))
            .collect();
        found.sort();
        macro_files.extend(found);
    }
    for file in macro_files {
        if let Ok(text) = std::fs::read_to_string(file) {
            macros.push('\n');
            macros.push_str(&text);
        }
    }
    let script = std::fs::read_to_string(root.join("configure")).unwrap_or_default();
    let options = autotools_options(&macros, &script);
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("path"))
        .filter_map(|rest| rest.trim_start().strip_prefix('='))
        .map(|p| p.trim().to_string())
        .filter(|p| std::fs::read_dir(root.join(p)).map_or(true, |mut d| d.next().is_none()))
        .map(|path| {
            let (stand_in, probe) = package_of(&path, probes);
            let name = path.rsplit('/').next().unwrap_or(&path).to_string();
            let mut switches = Vec::new();
            if stand_in != StandIn::Nothing {
                switches.extend(cmake_switches(top_cmake, &name));
                switches.extend(autotools_switches(&options, &name));
            }
            Submodule {
                stub_makefile: in_subdirs(root, &path),
                path,
                stand_in,
                probe,
                switches,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testutil::tree;

    #[test]
    fn names_compare_without_prefixes_separators_and_versions() {
        assert_eq!(normalise("libFoo-2"), "foo");
        assert_eq!(normalise("FOO"), "foo");
        assert_eq!(normalise("yaml-cpp.git"), "yamlcpp");
    }

    #[test]
    fn probes_name_the_package_and_switches_pick_the_system_copy() {
        let tmp = tree(&[
            (
                ".gitmodules",
                "[submodule \"a\"]\n\tpath = deps/libsodium\n\turl = x\n[submodule \"b\"]\n\tpath = deps/frob\n\turl = y\n[submodule \"c\"]\n\tpath = deps/fmt\n\turl = z\n",
            ),
            ("Makefile.am", "SUBDIRS = src \\\n  deps/libsodium\n"),
        ]);
        let probes = vec!["Sodium".to_string(), "ZLIB".to_string()];
        let cmake = "option(USE_SYSTEM_FMT \"\" OFF)\noption(FMT_BUNDLED \"\" ON)\noption(BUILD_TESTS \"\" OFF)\n";
        let configure =
            "AC_ARG_WITH([system-sodium], [AS_HELP_STRING(x)])\nAC_ARG_ENABLE([bundled-fmt])\n";
        let found = missing(tmp.path(), &probes, cmake, configure);
        assert_eq!(
            found,
            [
                Submodule {
                    path: "deps/libsodium".into(),
                    stand_in: StandIn::Package("libsodium-dev"),
                    probe: None,
                    switches: vec!["--with-system-sodium".into()],
                    stub_makefile: true,
                },
                Submodule {
                    path: "deps/frob".into(),
                    stand_in: StandIn::Nothing,
                    probe: None,
                    switches: vec![],
                    stub_makefile: false,
                },
                Submodule {
                    path: "deps/fmt".into(),
                    stand_in: StandIn::Package("libfmt-dev"),
                    probe: None,
                    switches: vec![
                        "-DUSE_SYSTEM_FMT=ON".into(),
                        "-DFMT_BUNDLED=OFF".into(),
                        "--disable-bundled-fmt".into()
                    ],
                    stub_makefile: false,
                },
            ]
        );
        assert_eq!(
            found[0].describe(),
            "deps/libsodium: Debian libsodium-dev, configured with --with-system-sodium, a stub Makefile in the empty directory"
        );
    }

    /// The switches a macro file or only the generated `configure`'s help declares count too.
    #[test]
    fn switches_come_from_macro_files_and_the_configure_help() {
        let tmp = tree(&[
            (
                ".gitmodules",
                "[submodule \"a\"]\n\tpath = modules/libsodium\n\turl = x\n[submodule \"b\"]\n\tpath = modules/zstd\n\turl = y\n",
            ),
            (
                "m4/ax_sodium.m4",
                "AC_DEFUN([AX_SODIUM], [\n  AC_ARG_WITH([system-sodium], [AS_HELP_STRING([--with-system-sodium], [use it])])\n])\n",
            ),
            (
                "configure",
                "#! /bin/sh\n  -with-* | --with-*)\nOptional Features:\n  --disable-option-checking  ignore unrecognized --enable/--with options\n  --disable-bundled-zstd  use the system zstd\nOptional Packages:\n  --with-PACKAGE[=ARG]    use PACKAGE [ARG=yes]\n  --with-system-sodium    use the system libsodium\n",
            ),
        ]);
        let found = missing(tmp.path(), &[], "", "AX_SODIUM\n");
        let switches: Vec<(&str, &[String])> = found
            .iter()
            .map(|m| (m.path.as_str(), m.switches.as_slice()))
            .collect();
        assert_eq!(
            switches,
            [
                (
                    "modules/libsodium",
                    &["--with-system-sodium".to_string()][..]
                ),
                ("modules/zstd", &["--disable-bundled-zstd".to_string()][..]),
            ]
        );
    }

    #[test]
    fn a_probe_finds_the_package_when_the_name_does_not() {
        let (stand_in, probe) = package_of("third_party/sodium-src", &["sodium".into()]);
        assert_eq!((stand_in, probe), (StandIn::Nothing, None));
        let (stand_in, probe) = package_of("third_party/Sodium", &["libsodium".into()]);
        assert_eq!(stand_in, StandIn::Package("libsodium-dev"));
        assert_eq!(probe, None);
        let (stand_in, probe) = package_of("ext/jsonc", &["json-c".into()]);
        assert_eq!(
            (stand_in, probe.as_deref()),
            (StandIn::Package("libjson-c-dev"), Some("json-c"))
        );
    }
}
