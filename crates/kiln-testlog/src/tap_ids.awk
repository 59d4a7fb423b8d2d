# TAP read as tap.rs reads it: the results of a subtest wait, one list per nesting level (4
# spaces), until the line of the test that holds them names their parent ("parent > child");
# `prove -v` headers (`t/x.t ..`) prefix ids with the script, except in node TAP (`node` set by
# node_ids.awk); a # SKIP or # TODO directive makes a test skipped; a test without a
# description is "#<number>". The YAML additions of node (suites, cancelled tests) change counts and
# the kind of an error, not an id or whether it passed.
function level_add(d, id, status) {
    n[d]++
    rid[d, n[d]] = id
    rst[d, n[d]] = status
    if (d + 1 > levels) levels = d + 1
}
function move_up(from, to, prefix,   i) {
    for (i = 1; i <= n[from]; i++) level_add(to, prefix rid[from, i], rst[from, i])
    n[from] = 0
}
function flush_top(   i) {
    for (i = 1; i <= n[0]; i++) record(file != "" ? file "::" rid[0, i] : rid[0, i], rst[0, i])
    n[0] = 0
}
function end_stream(   d) {
    for (d = levels - 1; d >= 1; d--) {
        if (n[d] == 0) continue
        move_up(d, d - 1, (d in announced ? announced[d] : "?") " > ")
    }
    flush_top()
    for (d = 0; d < levels; d++) { n[d] = 0; delete announced[d] }
    levels = 1
}
# The first "#" of `rest` that starts a SKIP or TODO directive (not after a backslash), or 0.
function directive(rest,   i, after, word) {
    for (i = 1; i <= length(rest); i++) {
        if (substr(rest, i, 1) != "#" || (i > 1 && substr(rest, i - 1, 1) == "\\")) continue
        after = substr(rest, i + 1)
        sub(/^[[:space:]]+/, "", after)
        word = tolower(substr(after, 1, 4))
        if (word == "skip") return i
        if (word == "todo" && substr(after, 5, 1) !~ /[A-Za-z0-9_]/) return i
    }
    return 0
}
function result(d, ok, number, rest,   cut, description, status, name, deepest) {
    cut = directive(rest)
    description = cut ? substr(rest, 1, cut - 1) : rest
    sub(/^[[:space:]]+/, "", description)
    sub(/[[:space:]]+$/, "", description)
    status = cut ? "skip" : ok ? "pass" : "fail"
    if (description == "") name = "#" (number != "" ? number : "?")
    else { name = description; gsub(/\\#/, "#", name) }
    if (d == 0) flush_top()
    while (levels > d + 2) {
        deepest = levels - 1
        if (n[deepest] > 0) move_up(deepest, d + 1, (deepest in announced ? announced[deepest] : "?") " > ")
        delete announced[deepest]
        levels--
    }
    if (levels > d + 1) {
        move_up(d + 1, d, name " > ")
        delete announced[d + 1]
    }
    level_add(d, name, status)
    yaml = -1
}
BEGIN { levels = 1; yaml = -1; file = "" }
{
    line = strip_ansi($0)
    sub(/[[:space:]]+$/, "", line)
    text = line
    sub(/^ +/, "", text)
    indent = length(line) - length(text)
    sub(/^[[:space:]]+/, "", text)
    if (yaml >= 0) {
        if (text == "...") yaml = -1
        next
    }
    d = int(indent / 4)
    if (text == "---") { yaml = d; next }
    if (file != "" && indent == 0 && text == "ok") { end_stream(); next }
    if (text ~ /^not ok([^A-Za-z0-9_]|$)/ || text ~ /^ok([^A-Za-z0-9_]|$)/) {
        ok = text ~ /^ok/
        rest = substr(text, ok ? 3 : 7)
        number = ""
        if (match(rest, /^[[:space:]]+[0-9]+/)) {
            number = substr(rest, 1, RLENGTH)
            sub(/^[[:space:]]+/, "", number)
            rest = substr(rest, RLENGTH + 1)
        }
        if (match(rest, /^[[:space:]]*-([[:space:]]|$)/)) rest = substr(rest, RLENGTH + 1)
        sub(/^[[:space:]]+/, "", rest)
        result(d, ok, number, rest)
        next
    }
    if (match(text, /^#[[:space:]]*Subtest:/)) {
        announced[d + 1] = trim(substr(text, RLENGTH + 1))
        if (d + 2 > levels) levels = d + 2
        next
    }
    if (text ~ /^1\.\.[0-9]+/) next
    if (index(text, "TAP version") == 1 && indent == 0) { end_stream(); next }
    if (!node && indent == 0 && text ~ /^[^[:space:]]+ \.\.+[[:space:]]*$/) {
        end_stream()
        file = text
        sub(/ .*/, "", file)
    }
}
END { end_stream(); print_ids() }
