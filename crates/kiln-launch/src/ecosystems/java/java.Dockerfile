# kiln's Java image: Debian's OpenJDK (bookworm: 17, trixie: 21, chosen by the SUITE and JDK
# arguments that kiln fills in from the build file) and Maven, with Debian's packaged Maven
# plugins and JUnit, whose repository (/usr/share/maven-repo) builds dependency-free projects
# offline when Maven Central cannot be reached.
ARG SUITE=bookworm
FROM debian:${SUITE}
ARG JDK=17

ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    MAVEN_OPTS="-Xmx1g" \
    GRADLE_OPTS="-Dorg.gradle.daemon=false"

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      openjdk-${JDK}-jdk-headless maven \
      libmaven-compiler-plugin-java libmaven-resources-plugin-java libsurefire-java \
      libmaven-jar-plugin-java junit4 junit5 \
      git patch ca-certificates procps unzip \
 && rm -rf /var/lib/apt/lists/*

# kiln:ca-bundle
# (An extra CA bundle is installed here, after apt has installed `ca-certificates`; the JDK's
# trust store is regenerated from the system CAs by update-ca-certificates' Java hook.)

RUN java -version && mvn --version
