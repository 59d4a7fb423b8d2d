# The spec reporter of `node --test` read as node.rs reads it, before the TAP rules of
# tap_ids.awk (which see node TAP, with `node` set so that no `prove` header is read): a `▶`
# line opens a parent at its indent, a result line (✔ ✖ ﹣) closes the parent of the same name
# and indent or records a test under the open parents ("parent > child"); a `# TODO` result
# is skipped; after `✖ failing tests:` the repeated failures are skipped until a result that
# does not follow a `test at` location starts another run.
function spec_path(name,   i, id) {
    id = ""
    for (i = 1; i <= depth; i++) id = id stack_name[i] " > "
    return id name
}
function spec_pop_from(indent) {
    while (depth > 0 && stack_at[depth] >= indent) depth--
}
function spec_mark(text) {
    if (index(text, "✔") == 1) return "✔"
    if (index(text, "✖") == 1) return "✖"
    if (index(text, "﹣") == 1) return "﹣"
    return ""
}
function spec_is_parent(text) {
    return index(text, "▶") == 1 && substr(text, length("▶") + 1) ~ /^[[:space:]]+[^[:space:]]/
}
function spec_is_result(text,   mark) {
    mark = spec_mark(text)
    return mark != "" && substr(text, length(mark) + 1) ~ /^[[:space:]]+[^[:space:]]/
}
# Splits a result line as the pattern of node.rs does: the shortest name after which only an
# optional "(1.5ms)" and an optional "# directive" follow. Sets spec_name and spec_todo.
function spec_split(rest,   i, tail, after) {
    for (i = 1; i <= length(rest); i++) {
        tail = substr(rest, i + 1)
        if (tail !~ /^([[:space:]]+\([0-9]+(\.[0-9]+)?m?s\))?([[:space:]]+#.*)?$/) continue
        spec_name = substr(rest, 1, i)
        if (match(tail, /^[[:space:]]+\([0-9]+(\.[0-9]+)?m?s\)/)) tail = substr(tail, RLENGTH + 1)
        after = ""
        if (match(tail, /^[[:space:]]+#/)) {
            after = substr(tail, RLENGTH + 1)
            sub(/^[[:space:]]+/, "", after)
        }
        spec_todo = toupper(substr(after, 1, 4)) == "TODO"
        return
    }
}
function spec_line(raw,   line, text, indent, mark, status, name, repeated) {
    line = strip_ansi(raw)
    sub(/[[:space:]]+$/, "", line)
    text = line
    sub(/^[[:space:]]+/, "", text)
    indent = length(line) - length(text)
    if (text == "✖ failing tests:") { in_failures = 1; after_location = 0; return }
    if (in_failures) {
        if (index(text, "test at ") == 1) { after_location = 1; return }
        repeated = after_location && index(text, "✖") == 1
        if (repeated || !(spec_is_parent(text) || spec_is_result(text))) { after_location = 0; return }
        in_failures = 0
        depth = 0
    }
    if (spec_is_parent(text)) {
        spec_pop_from(indent)
        name = substr(text, length("▶") + 1)
        depth++
        stack_at[depth] = indent
        stack_name[depth] = trim(name)
        return
    }
    if (!spec_is_result(text)) return
    mark = spec_mark(text)
    spec_split(trim(substr(text, length(mark) + 1)))
    name = trim(spec_name)
    status = spec_todo ? "skip" : mark == "✔" ? "pass" : mark == "✖" ? "fail" : "skip"
    if (depth > 0 && stack_at[depth] == indent && stack_name[depth] == name) depth--
    else spec_pop_from(indent)
    record(spec_path(name), status)
}
BEGIN { node = 1; depth = 0 }
{ spec_line($0) }
