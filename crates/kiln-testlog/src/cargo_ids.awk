# Prints every line of a cargo test log, then the results again under the ids kiln gives them
# (see cargo.rs: a name that two binaries print gets the prefix of its binary, " - should panic"
# is dropped, the line of a doctest becomes its rank among the doctests of its item): first
# "test <id> ... ok|FAILED|ignored" for every test but doctests, for parse_log_cargo of the
# SWE-bench harness; then "[PASSED] <id>" or "[FAILED] <id>" for every test that ran, for its
# parse_log_jest_json. Eval scripts pipe the test output through it.
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
    n++
    P[n] = (doc != "") ? doc : prefix
    N[n] = name
    W[n] = word
    D[n] = 0
    # A doctest: the name up to its first " (line N)" that the end of the name may follow
    # only with " - ..."; the line and that rest are kept apart.
    if (doc != "" && name ~ /. \(line [0-9]+\)( - .*)?$/) {
        off = 0
        while ((i = index(substr(name, off + 1), " (line ")) > 0) {
            at = off + i
            tail = substr(name, at + 7)
            if (at > 1 && tail ~ /^[0-9]+\)( - .*)?$/) break
            off = at
        }
        D[n] = 1
        N[n] = substr(name, 1, at - 1)
        L[n] = tail
        sub(/\).*/, "", L[n])
        S[n] = tail
        sub(/^[0-9]+\)/, "", S[n])
    }
}
END {
    for (i = 1; i <= n; i++) {
        if (!D[i]) continue
        rank = 1
        for (j = 1; j <= n; j++)
            if (D[j] && j != i && P[j] == P[i] && N[j] == N[i] && (L[j] + 0 < L[i] + 0 || (L[j] + 0 == L[i] + 0 && j < i))) rank++
        R[i] = rank
    }
    for (i = 1; i <= n; i++)
        if (D[i]) N[i] = N[i] (R[i] > 1 ? "#" R[i] : "") S[i]
    for (i = 1; i <= n; i++)
        if (!((N[i] SUBSEP P[i]) in pair)) { pair[N[i] SUBSEP P[i]] = 1; binaries[N[i]]++ }
    for (i = 1; i <= n; i++) {
        id[i] = (binaries[N[i]] > 1 ? P[i] : "") N[i]
        if (!D[i]) print "test " id[i] " ... " W[i]
    }
    for (i = 1; i <= n; i++) {
        if (W[i] == "ok") print "[PASSED] " id[i]
        else if (W[i] == "FAILED") print "[FAILED] " id[i]
    }
}
