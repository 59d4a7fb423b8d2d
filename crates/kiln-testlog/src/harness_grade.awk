# Grades one test run as the SWE-bench harness does, for verifiers that run where no Python is
# (Harbor's tests/test.sh): the harness's log parser named by -v parser (one of those ported in
# swebench.rs, which the tests hold this port to) reads the run's output, the harness's view of
# it (through kiln's output filter or id script where the row has one), and every test of the
# files -v fail_to_pass and -v pass_to_pass (one id a line) must be read as passed (PASSED or
# XFAIL, the harness's test_passed, with its prefix rule for ids cut inside their parameters).
# A run whose -v exit_code is not 0 while the parser reads tests and no failure or error among
# them is invalid, as in the harness (get_logs_eval). Prints the verdict of every listed test
# and exits 0 when every one passed (at least one FAIL_TO_PASS), else 1. With -v dump=1 it
# prints the status map instead, one "STATUS<tab>id" line a test (the tests compare it with
# swebench.rs).
#
# Whitespace is Python's str.split() and str.strip() whitespace: ASCII space, \t \n \v \f \r,
# \034-\037, and the UTF-8 spaces U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
# U+202F, U+205F and U+3000. Run under LC_ALL=C so that every awk reads bytes alike.
# POSIX awk only (mawk, gawk, busybox awk); no single quote anywhere, so sh can quote it.
function spaces(s) {
    gsub(/\302[\205\240]|\341\232\200|\342\200[\200-\212\250\251\257]|\342\201\237|\343\200\200/, " ", s)
    gsub(/[\t\n\013\f\r\034-\037]/, " ", s)
    return s
}
# Python str.split(): the words of s, in w[1..n]; returns n.
function pysplit(s, w) {
    return split(spaces(s), w, " ")
}
# Python str.strip(): s without leading and trailing whitespace.
function strip(s,   u) {
    u = "(\302[\205\240]|\341\232\200|\342\200[\200-\212\250\251\257]|\342\201\237|\343\200\200|[ \t\n\013\f\r\034-\037])+"
    sub("^" u, "", s)
    sub(u "$", "", s)
    return s
}
function is_status(word) {
    return word == "FAILED" || word == "PASSED" || word == "SKIPPED" || word == "ERROR" || word == "XFAIL"
}
function starts_status(line) {
    return line ~ /^(FAILED|PASSED|SKIPPED|ERROR|XFAIL)/
}
function ends_status(line) {
    return line ~ /(FAILED|PASSED|SKIPPED|ERROR|XFAIL)$/
}
# _is_skip_summary: "SKIPPED [N] path:line: reason", where [N] is no test.
function skip_summary(status, name) {
    return status == "SKIPPED" && name ~ /^\[[0-9]+\]$/
}
function put(name, status) {
    if (!(name in map)) order[++count] = name
    map[name] = status
}
function join(w, from, to,   s, i) {
    s = w[from]
    for (i = from + 1; i <= to; i++) s = s " " w[i]
    return s
}
# parse_log_pytest
function pytest_v1(line,   w, n) {
    if (!starts_status(line)) return
    if (substr(line, 1, 6) == "FAILED") gsub(/ - /, " ", line)
    n = pysplit(line, w)
    if (n <= 1 || skip_summary(w[1], w[2])) return
    put(w[2], w[1])
}
# parse_log_pytest_v2
function pytest_v2(line,   w, n, cut) {
    gsub(/\[[0-9]+m/, "", line)
    gsub(/[\001-\037]/, "", line)
    if (starts_status(line)) {
        if (substr(line, 1, 6) == "FAILED" && (cut = index(line, " - ")) > 0) line = substr(line, 1, cut - 1)
        n = pysplit(line, w)
        if (n >= 2 && !skip_summary(w[1], w[2])) put(join(w, 2, n), w[1])
    } else if (ends_status(line)) {
        n = pysplit(line, w)
        if (n >= 2) put(join(w, 1, n - 1), w[n])
    }
}
# parse_log_cargo: ^test\s+(\S+)\s+\.\.\.\s+(\w+)$ on the stripped line; ok and FAILED only.
function cargo(line,   w, n) {
    n = pysplit(strip(line), w)
    if (n != 4 || w[1] != "test" || w[3] != "...") return
    if (w[4] == "ok") put(w[2], "PASSED")
    else if (w[4] == "FAILED") put(w[2], "FAILED")
}
# parse_log_jest_json: ^\[(PASSED|FAILED)\]\s(.+)$ on the stripped line.
function jest_json(line,   t, status, rest, ws) {
    t = strip(line)
    if (substr(t, 1, 8) == "[PASSED]") status = "PASSED"
    else if (substr(t, 1, 8) == "[FAILED]") status = "FAILED"
    else return
    rest = substr(t, 9)
    # \s is one whitespace character: one byte, or one of the UTF-8 spaces.
    ws = "^(\302[\205\240]|\341\232\200|\342\200[\200-\212\250\251\257]|\342\201\237|\343\200\200|[ \t\n\013\f\r\034-\037])"
    if (!match(rest, ws)) return
    rest = substr(rest, RLENGTH + 1)
    if (rest == "") return
    put(rest, status)
}
# parse_log_gotest: ^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$ on the stripped line; the name is
# greedy, so it ends at the last " (" that leaves a non-empty duration before the final ")".
function gotest(line,   t, status, rest, i, n) {
    t = strip(line)
    if (substr(t, 1, 10) == "--- PASS: ") status = "PASSED"
    else if (substr(t, 1, 10) == "--- FAIL: ") status = "FAILED"
    else if (substr(t, 1, 10) == "--- SKIP: ") status = "SKIPPED"
    else return
    rest = substr(t, 11)
    n = length(rest)
    if (substr(rest, n, 1) != ")") return
    for (i = n - 3; i >= 2; i--) {
        if (substr(rest, i, 2) == " (") {
            put(substr(rest, 1, i - 1), status)
            return
        }
    }
}
# parse_log_tap: ^(ok|not ok) (\d+) (.+)$ on the stripped line.
function tap(line,   t, status, rest) {
    t = strip(line)
    if (substr(t, 1, 3) == "ok ") { status = "PASSED"; rest = substr(t, 4) }
    else if (substr(t, 1, 7) == "not ok ") { status = "FAILED"; rest = substr(t, 8) }
    else return
    if (!match(rest, /^[0-9]+ /)) return
    rest = substr(rest, RLENGTH + 1)
    if (rest == "") return
    put(rest, status)
}
function passing(status) {
    return status == "PASSED" || status == "XFAIL"
}
# The harness's _resolve_case: the key of id, exact or, for an id cut inside its parameters
# (more [ than ]), the first key it begins when all such keys agree on passing. "" when none.
function resolve(id,   opened, closed, i, key, first, agree) {
    if (id in map) return id
    opened = gsub(/\[/, "[", id)
    closed = gsub(/\]/, "]", id)
    if (opened <= closed) return ""
    first = ""
    agree = 1
    for (i = 1; i <= count; i++) {
        key = order[i]
        if (substr(key, 1, length(id)) != id) continue
        if (first == "") first = key
        else if (passing(map[key]) != passing(map[first])) agree = 0
    }
    return agree ? first : ""
}
# Reads a list file into ids[kind, 1..n]; returns n, or -1 when the file cannot be read.
function read_list(file, kind,   line, n, got) {
    n = 0
    while ((got = (getline line < file)) > 0) {
        if (line != "") listed[kind, ++n] = line
    }
    close(file)
    return got < 0 ? -1 : n
}
BEGIN {
    known = parser == "parse_log_pytest" || parser == "parse_log_pytest_v2" || parser == "parse_log_cargo" \
        || parser == "parse_log_jest_json" || parser == "parse_log_gotest" || parser == "parse_log_tap"
    count = 0
}
{
    if (parser == "parse_log_pytest") pytest_v1($0)
    else if (parser == "parse_log_pytest_v2") pytest_v2($0)
    else if (parser == "parse_log_cargo") cargo($0)
    else if (parser == "parse_log_jest_json") jest_json($0)
    else if (parser == "parse_log_gotest") gotest($0)
    else if (parser == "parse_log_tap") tap($0)
}
END {
    if (dump) {
        for (i = 1; i <= count; i++) printf "%s\t%s\n", map[order[i]], order[i]
        exit 0
    }
    if (!known) {
        printf "not graded: %s is not a harness parser this grader knows\n", parser
        exit 1
    }
    nf = read_list(fail_to_pass, "FAIL_TO_PASS")
    np = read_list(pass_to_pass, "PASS_TO_PASS")
    if (nf < 0 || np < 0) {
        printf "not graded: cannot read the test lists %s and %s\n", fail_to_pass, pass_to_pass
        exit 1
    }
    failures = 0
    for (i = 1; i <= count; i++) if (map[order[i]] == "FAILED" || map[order[i]] == "ERROR") failures++
    printf "%s read %d test(s) (%d failed or errored); the test command exited %s\n", parser, count, failures, exit_code
    invalid = exit_code != "" && exit_code != "0" && count > 0 && failures == 0
    bad = 0
    for (k = 1; k <= 2; k++) {
        kind = k == 1 ? "FAIL_TO_PASS" : "PASS_TO_PASS"
        n = k == 1 ? nf : np
        for (i = 1; i <= n; i++) {
            id = listed[kind, i]
            key = resolve(id)
            verdict = key == "" ? "not found" : map[key]
            if (key == "" || !passing(map[key])) bad++
            printf "%s %s: %s\n", kind, verdict, id
        }
    }
    if (nf == 0) {
        print "not resolved: the FAIL_TO_PASS list is empty"
        exit 1
    }
    if (invalid) {
        printf "not resolved: the test command exited %s and no test failed, an invalid run\n", exit_code
        exit 1
    }
    if (bad > 0) {
        printf "not resolved: %d of %d listed test(s) did not pass\n", bad, nf + np
        exit 1
    }
    printf "resolved: all %d listed test(s) passed\n", nf + np
    exit 0
}
