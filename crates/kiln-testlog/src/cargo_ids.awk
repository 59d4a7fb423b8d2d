# Prints every line of a cargo test log, then one line "test <id> ... ok|FAILED|ignored" per
# test that is not a doctest, <id> being the id kiln gives it (see cargo.rs: a name that two
# binaries print gets the prefix of its binary, " - should panic" is dropped). Eval scripts pipe
# the test output through it so that parse_log_cargo of the SWE-bench harness reads those ids.
# POSIX awk only (mawk, gawk, busybox awk); no single quote anywhere: sh quotes the program.
function artifact(path,   f) {
    f = path
    sub(/.*[\/\\]/, "", f)
    sub(/\.exe$/, "", f)
    if (match(f, /-[0-9A-Fa-f]+$/)) return substr(f, 1, RSTART - 1)
    return f
}
function target(unit, source, binary,   name, top, kind) {
    name = artifact(binary != "" ? binary : source)
    top = source
    sub(/[\/\\].*/, "", top)
    if (unit && source ~ /lib\.rs$/) kind = "lib"
    else if (unit && (index(source, "/bin/") || source ~ /main\.rs$/)) kind = "bin"
    else if (unit) kind = "unit"
    else if (binary != "" && top == "tests") kind = "test"
    else if (binary != "" && top == "benches") kind = "bench"
    else if (binary != "" && top == "examples") kind = "example"
    else return name "::"
    return name "::" kind "::"
}
{
    print
    line = $0
    gsub(/\033\[[0-9;?]*[ -\/]*[@-~]/, "", line)
    sub(/[ \t\r]+$/, "", line)
    rest = line
    if (sub(/^[ \t]*Running /, "", rest)) {
        unit = 0
        if (rest ~ /^unittests [^ \t]+( \(.+\))?$/) { unit = 1; sub(/^unittests /, "", rest) }
        if (rest ~ /^[^ \t]+( \(.+\))?$/) {
            source = rest
            sub(/ .*/, "", source)
            binary = substr(rest, length(source) + 1)
            if (binary != "") binary = substr(binary, 3, length(binary) - 3)
            prefix = target(unit, source, binary)
            doc = ""
        }
        next
    }
    if (line ~ /^[ \t]*Doc-tests [^ \t]+$/) {
        doc = line
        sub(/^[ \t]*Doc-tests /, "", doc)
        doc = doc "::doc::"
        next
    }
    if (substr(line, 1, 5) != "test ") next
    s = substr(line, 6)
    off = 0
    name = ""
    while ((i = index(substr(s, off + 1), " ... ")) > 0) {
        at = off + i
        word = substr(s, at + 5)
        if (at > 1 && word ~ /^(ok|FAILED|ignored|bench)([,:].*)?$/) {
            name = substr(s, 1, at - 1)
            break
        }
        off = at
    }
    if (name == "") next
    sub(/[,:].*/, "", word)
    if (word == "bench") word = "ok"
    sub(/ - should panic$/, "", name)
    if (doc != "" && name ~ /. \(line [0-9]+\)( - .*)?$/) next
    p = (doc != "") ? doc : prefix
    n++
    P[n] = p
    N[n] = name
    W[n] = word
    if (!((name SUBSEP p) in pair)) { pair[name SUBSEP p] = 1; binaries[name]++ }
}
END {
    for (i = 1; i <= n; i++) print "test " (binaries[N[i]] > 1 ? P[i] : "") N[i] " ... " W[i]
}
