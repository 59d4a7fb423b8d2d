//! The Java plan: Maven (`pom.xml`) or Gradle (`build.gradle`, `build.gradle.kts`), on OpenJDK
//! 17 (bookworm) or 21 (trixie) as the build file's release level asks, with the JUnit XML
//! reports printed after the test run.
//!
//! Maven Central may be unreachable. When Maven fails to resolve something online, the plan
//! retries offline against Debian's Maven repository (`/usr/share/maven-repo`, with Debian's
//! Maven plugins and JUnit), which builds projects that need nothing else, and keeps that
//! setting (`~/.m2/settings.xml`) for the test runs.

use std::path::Path;

use kiln_core::ImageBuild;

use super::entry::Entry;
use crate::debian::Suite;
use crate::images;
use crate::plan::{Plan, PlanContext, RepairContext, read};
use crate::steps::{Step, TestCommand};

/// Dockerfile of the Java image (`ARG SUITE` and `ARG JDK` pick OpenJDK 17 or 21, plus Maven).
pub const DOCKERFILE: &str = include_str!("java.Dockerfile");

/// The Java image for OpenJDK `jdk` (17 on bookworm, 21 on trixie; anything newer than 17
/// gets 21), tagged `kiln/java:<jdk>-<hash>`.
#[must_use]
pub fn image(jdk: u32, ca_bundle: Option<&[u8]>) -> ImageBuild {
    let (suite, jdk) = if jdk > 17 {
        (Suite::Trixie, 21)
    } else {
        (Suite::Bookworm, 17)
    };
    let dockerfile = images::with_arg(DOCKERFILE, "SUITE", suite.name());
    let dockerfile = images::with_arg(&dockerfile, "JDK", &jdk.to_string());
    images::image(dockerfile, "java", &jdk.to_string(), ca_bundle)
}

/// Debian's Maven repository, used offline when Maven Central cannot be reached.
pub const DEBIAN_MAVEN_REPO: &str = "/usr/share/maven-repo";

/// The build tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JavaBuild {
    /// `pom.xml`.
    Maven,
    /// `build.gradle(.kts)`; `wrapper` when `gradlew` is committed.
    Gradle {
        /// `./gradlew` exists.
        wrapper: bool,
    },
}

/// What the build files say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaProject {
    /// Maven or Gradle.
    pub build: JavaBuild,
    /// The Java release the build asks for, and the file and field that say so.
    pub release: Option<(u32, String)>,
}

/// The Java feature release of `1.8`, `8`, `11`, `JavaVersion.VERSION_17`, `VERSION_1_8`.
fn java_release(text: &str) -> Option<u32> {
    let text = text
        .trim()
        .trim_matches(['\'', '"'])
        .trim_start_matches("JavaVersion.")
        .trim_start_matches("VERSION_")
        .replace('_', ".");
    let text = text.strip_prefix("1.").unwrap_or(&text);
    text.split('.').next()?.parse().ok()
}

/// The text of the first `<tag>...</tag>` in `xml`.
fn xml_value<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find("</")? + start;
    Some(xml[start..end].trim())
}

/// The release a `pom.xml` asks for, resolving one level of `${property}`.
fn maven_release(pom: &str) -> Option<(u32, String)> {
    for tag in [
        "maven.compiler.release",
        "release",
        "maven.compiler.source",
        "maven.compiler.target",
        "source",
        "java.version",
    ] {
        let Some(value) = xml_value(pom, tag) else {
            continue;
        };
        let resolved = match value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
            Some(property) => xml_value(pom, property).unwrap_or(value),
            None => value,
        };
        if let Some(release) = java_release(resolved) {
            return Some((release, format!("pom.xml <{tag}> is `{value}`")));
        }
    }
    None
}

/// The release a Gradle build file asks for.
fn gradle_release(text: &str, file: &str) -> Option<(u32, String)> {
    for key in [
        "jvmToolchain(",
        "JavaLanguageVersion.of(",
        "sourceCompatibility",
        "targetCompatibility",
    ] {
        let Some(at) = text.find(key) else {
            continue;
        };
        let rest = text[at + key.len()..]
            .trim_start()
            .trim_start_matches('=')
            .trim_start();
        let value: String = rest
            .chars()
            .take_while(|c| !matches!(c, ')' | '\n' | '\r'))
            .collect();
        if let Some(release) = java_release(value.trim()) {
            return Some((
                release,
                format!("{file} `{}`", format!("{key}{value}").trim()),
            ));
        }
    }
    None
}

/// Reads the build files at the root. `None` when there is neither Maven nor Gradle.
#[must_use]
pub fn detect(root: &Path) -> Option<JavaProject> {
    if let Some(pom) = read(root, "pom.xml") {
        return Some(JavaProject {
            build: JavaBuild::Maven,
            release: maven_release(&pom),
        });
    }
    let file = ["build.gradle.kts", "build.gradle"]
        .into_iter()
        .find(|f| root.join(f).is_file())?;
    let text = read(root, file).unwrap_or_default();
    Some(JavaProject {
        build: JavaBuild::Gradle {
            wrapper: root.join("gradlew").is_file(),
        },
        release: gradle_release(&text, file),
    })
}

/// Chooses OpenJDK 17 or 21 and says why.
#[must_use]
pub fn choose_jdk(project: &JavaProject) -> (u32, String) {
    match &project.release {
        Some((release, source)) if *release <= 17 => (
            17,
            format!("OpenJDK 17 (Debian bookworm) builds Java {release}: {source}"),
        ),
        Some((release, source)) if *release <= 21 => (
            21,
            format!("OpenJDK 21 (Debian trixie) builds Java {release}: {source}"),
        ),
        Some((release, source)) => (
            21,
            format!(
                "OpenJDK 21 (Debian trixie), the newest configured, though the build asks for Java {release}: {source}"
            ),
        ),
        None => (
            17,
            "OpenJDK 17 (Debian bookworm): the build files name no Java release".into(),
        ),
    }
}

/// Runs a Maven goal; when it fails to resolve artifacts online, switches Maven to offline
/// mode against Debian's repository for good (settings in `~/.m2`) and runs it again. Other
/// failures (compile errors) are not retried, so they keep their own message.
fn maven_with_fallback(goal: &str) -> String {
    let log = "/tmp/kiln-mvn.log";
    format!(
        "mvn -B -ntp {goal} >{log} 2>&1; rc=$?; cat {log}; \
if [ $rc -ne 0 ] && grep -q -e 'Could not transfer artifact' -e 'Could not resolve dependencies' -e 'could not be resolved' -e 'Unknown host' {log}; then \
echo '[kiln] Maven could not resolve online; retrying offline against Debian'\"'\"'s Maven repository ({DEBIAN_MAVEN_REPO})'; \
mkdir -p ~/.m2 && printf '<settings><localRepository>{DEBIAN_MAVEN_REPO}</localRepository><offline>true</offline></settings>\\n' >~/.m2/settings.xml && mvn -B -ntp {goal}; \
else exit $rc; fi"
    )
}

/// The Java plan, when the root holds `pom.xml` or a Gradle build file.
#[must_use]
pub fn plan(cx: &PlanContext<'_>) -> Option<Plan> {
    let project = detect(cx.root)?;
    let (jdk, mut version_reason) = choose_jdk(&project);
    let mut setup = vec![Step::git_setup()];
    let (name, compile, test, resolution) = match &project.build {
        JavaBuild::Maven => {
            setup.push(Step::Shell(maven_with_fallback("test-compile")));
            (
                "java-maven",
                "mvn -B -ntp test-compile".to_string(),
                // `-fae` runs every module's tests even when one fails; old reports are removed
                // first because the image keeps the baseline's.
                "find . -path '*/target/surefire-reports' -prune -exec rm -rf {} +; mvn -B -ntp -fae test -Dsurefire.printSummary=true 2>&1; rc=$?; find . -path '*/target/surefire-reports/TEST-*.xml' -exec cat {} +; exit $rc".to_string(),
                format!(
                    "versions as declared in the POM (Maven has no lockfile or date cut-off); offline fallback to Debian's Maven repository ({DEBIAN_MAVEN_REPO}) when Maven Central is unreachable"
                ),
            )
        }
        JavaBuild::Gradle { wrapper } => {
            let gradle = if *wrapper {
                "./gradlew"
            } else {
                version_reason.push_str(
                    "; no gradlew: the image has no Gradle (Debian's gradle 4.4 cannot run on JDK 17), so the build is expected to fail",
                );
                "gradle"
            };
            if *wrapper {
                setup.push(Step::shell("chmod +x gradlew"));
            }
            let compile = format!("{gradle} --no-daemon --console=plain testClasses");
            setup.push(Step::Shell(compile.clone()));
            (
                "java-gradle",
                compile,
                format!(
                    "find . -path '*/build/test-results' -prune -exec rm -rf {{}} +; {gradle} --no-daemon --console=plain --continue test 2>&1; rc=$?; find . -path '*/build/test-results/test/*.xml' -exec cat {{}} +; exit $rc"
                ),
                "versions as declared in the Gradle build (no lockfile or date cut-off applied)"
                    .to_string(),
            )
        }
    };
    Some(Plan {
        name: name.to_string(),
        language: "java",
        image: image(jdk, cx.ca_bundle),
        version_reason,
        setup,
        rebuild: vec![Step::Shell(compile)],
        test: TestCommand::plain(test),
        test_scope: "all".into(),
        whole_test: None,
        collect: None,
        parser: "junit-xml",
        resolution,
        cutoff: None,
        repair: RepairContext::default(),
    })
}

/// Java's line in the registry (Maven, Gradle).
pub(crate) static ENTRY: Entry = Entry {
    name: "java",
    plan,
    rules: &[crate::repair::SYSTEM, crate::repair::LAST],
    interpreter: None,
    // Maven and Gradle resolve from the build file alone; the local repository is a cache.
    fresh: None,
    rewrites: &[],
    package_index: Some("https://repo.maven.apache.org/maven2/"),
    leave_out: None,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testutil::plan_of;

    #[test]
    fn maven_release_picks_the_jdk() {
        let pom = "<project><properties><java.version>21</java.version><maven.compiler.source>${java.version}</maven.compiler.source></properties></project>";
        let plan = plan_of(plan, &[("pom.xml", pom)], None).expect("no plan");
        assert!(
            plan.image.tag.starts_with("kiln/java:21-"),
            "{}",
            plan.image.tag
        );
        assert!(
            plan.version_reason
                .contains("<maven.compiler.source> is `${java.version}`"),
            "{}",
            plan.version_reason
        );
        assert_eq!(plan.parser, "junit-xml");
        assert!(plan.setup[1].render().contains("<offline>true"));
        assert!(plan.test.render().ends_with("exit $rc"));
        let pom = "<project><build><plugins><plugin><configuration><source>1.8</source></configuration></plugin></plugins></build></project>";
        let plan = plan_of(super::plan, &[("pom.xml", pom)], None).expect("no plan");
        assert!(plan.image.tag.starts_with("kiln/java:17-"));
        assert!(plan.version_reason.contains("builds Java 8"));
    }

    #[test]
    fn gradle_with_and_without_wrapper() {
        let plan = plan_of(
            plan,
            &[
                (
                    "build.gradle.kts",
                    "java {\n  toolchain { languageVersion.set(JavaLanguageVersion.of(11)) }\n}\n",
                ),
                ("gradlew", "#!/bin/sh\n"),
            ],
            None,
        )
        .expect("no plan");
        assert_eq!(plan.name, "java-gradle");
        assert!(plan.setup.contains(&Step::shell(
            "./gradlew --no-daemon --console=plain testClasses"
        )));
        assert!(plan.test.render().contains("build/test-results/test/*.xml"));
        assert!(
            plan.version_reason.contains("Java 11"),
            "{}",
            plan.version_reason
        );
        let plan = plan_of(
            super::plan,
            &[(
                "build.gradle",
                "sourceCompatibility = JavaVersion.VERSION_1_8\n",
            )],
            None,
        )
        .expect("no plan");
        assert!(plan.version_reason.contains("no gradlew"));
        assert!(plan.version_reason.contains("Java 8"));
        assert_eq!(java_release("VERSION_17"), Some(17));
        assert_eq!(java_release("'1.8'"), Some(8));
    }
}
