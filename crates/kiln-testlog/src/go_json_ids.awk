# The events of `go test -json` read as go.rs reads them: a test is `<package>::<name>`; a result
# counts only for a test that had a `run` event (once any test had one); a test that started and
# never finished is an error, and so is a failed package without a failed test.
# The value of the JSON string field `key` of `line` (escapes read), or "" and found = 0.
function field(line, key,   start, i, c, out, code) {
    found = 0
    start = index(line, "\"" key "\":\"")
    if (!start) return ""
    found = 1
    out = ""
    for (i = start + length(key) + 4; i <= length(line); i++) {
        c = substr(line, i, 1)
        if (c == "\"") break
        if (c != "\\") { out = out c; continue }
        i++
        c = substr(line, i, 1)
        if (c == "n") out = out "\n"
        else if (c == "t") out = out "\t"
        else if (c == "r") out = out "\r"
        else if (c == "u") {
            code = hex(substr(line, i + 1, 4))
            out = out (code >= 32 && code < 127 ? sprintf("%c", code) : "\\u" substr(line, i + 1, 4))
            i += 4
        } else out = out c
    }
    return out
}
function hex(s,   i, v) {
    v = 0
    for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", tolower(substr(s, i, 1))) - 1
    return v
}
{
    line = trim($0)
    if (substr(line, 1, 1) != "{") {
        line = strip_ansi(line)
        if (match(line, /^FAIL[[:space:]]+[^[:space:]]+/)) {
            package = substr(line, 5, RLENGTH - 4)
            sub(/^[[:space:]]+/, "", package)
            failed_package[package] = 1
        }
        next
    }
    action = field(line, "Action")
    if (!found) next
    package = field(line, "Package")
    if (!found) package = field(line, "ImportPath")
    test = field(line, "Test")
    if (found) {
        id = package "::" test
        if (action == "run") { started[id] = 0; any_run = 1; next }
        status = tolower(action)
        if (status != "pass" && status != "fail" && status != "skip") next
        if (action != status && action != toupper(action)) next
        if (id in started) started[id] = 1
        else if (any_run) next
        if (status == "fail") package_with_failed_test[package] = 1
        record(id, status)
    } else if (action == "fail" || action == "build-fail") {
        failed_package[package] = 1
    }
}
END {
    for (id in started) if (!started[id]) record(id, "error")
    for (package in failed_package)
        if (package != "" && !(package in package_with_failed_test)) record(package, "error")
    print_ids()
}
