# Shared by the id scripts of swebench.rs, which sh runs as one program with this file first:
# ids normalised as normalize.rs does (run-specific temporary directories become <tmp>), the
# same id kept at its worst status,
# "/testbed/" taken off as ParsedLog::relative_to does, and at the end one "[PASSED] <id>" or
# "[FAILED] <id>" line per test that ran (the lines the SWE-bench harness reads with
# parse_log_jest_json). POSIX awk only; no single quote anywhere: sh quotes the program.
function strip_ansi(s) {
    gsub(/\033\[[0-9;?]*[ -\/]*[@-~]/, "", s)
    gsub(/\033\][^\007\033]*(\007|\033\\)/, "", s)
    gsub(/\033[@-Z\\-_]/, "", s)
    return s
}
function trim(s) {
    sub(/^[[:space:]]+/, "", s)
    sub(/[[:space:]]+$/, "", s)
    return s
}
function severity(status) {
    return status == "skip" ? 0 : status == "pass" ? 1 : status == "fail" ? 2 : 3
}
function keep(id, status) {
    if (!(id in kept) || severity(status) > severity(kept[id])) kept[id] = status
}
function record(raw, status,   id) {
    id = trim(strip_ansi(raw))
    gsub(/(\/private)?(\/var\/folders\/[^\/[:space:]]+\/[^\/[:space:]]+\/T|\/tmp)(\/pytest-of-[^]\/[:space:]]+\/pytest-[0-9]+(\/[^]\/[:space:]]+)?|\/\.?tmp[A-Za-z0-9_][A-Za-z0-9_][A-Za-z0-9_][A-Za-z0-9_][A-Za-z0-9_][A-Za-z0-9_]+|\/go-build[0-9]+)/, "<tmp>", id)
    sub(/([[:space:]]+\([0-9]+(\.[0-9]+)?[[:space:]]*(ns|us|µs|ms|s|sec|secs|second|seconds|m|min)\)|[[:space:]]+\[[0-9]+(\.[0-9]+)?[[:space:]]*(ms|s)\]|[[:space:]]+in[[:space:]]+[0-9]+(\.[0-9]+)?[[:space:]]*(ns|us|µs|ms|s|sec|second|seconds))$/, "", id)
    id = trim(id)
    if (id != "") keep(id, status)
}
function print_ids(   id, n, moved, rest) {
    for (id in kept) if (index(id, "/testbed/") == 1) moved = 1
    if (moved) {
        for (id in kept) {
            rest = id
            if (index(id, "/testbed/") == 1) rest = substr(id, 10)
            if (!(rest in final) || severity(kept[id]) > severity(final[rest])) final[rest] = kept[id]
        }
    } else {
        for (id in kept) final[id] = kept[id]
    }
    for (id in final) {
        if (final[id] == "pass") print "[PASSED] " id
        else if (final[id] != "skip") print "[FAILED] " id
    }
}
