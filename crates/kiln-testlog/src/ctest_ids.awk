# The result lines of CTest (`1/7 Test #1: name .....   Passed    0.01 sec`) read as ctest.rs reads
# them: the name ends at its first blank, the verdict follows the dots.
{
    line = strip_ansi($0)
    sub(/[[:space:]]+$/, "", line)
    if (!match(line, /^[[:space:]]*[0-9]+\/[0-9]+ Test[[:space:]]+#[0-9]+: /)) next
    body = substr(line, RLENGTH + 1)
    if (!match(body, /[[:space:]]+[0-9.]+ sec[[:space:]]*$/)) next
    body = substr(body, 1, RSTART - 1)
    if (!match(substr(body, 2), /[[:space:]]/)) next
    name = substr(body, 1, RSTART)
    verdict = substr(body, RSTART + 1)
    if (match(verdict, /^ \.+/)) verdict = substr(verdict, RLENGTH + 1)
    else verdict = substr(verdict, 2)
    sub(/^[[:space:]]+/, "", verdict)
    if (verdict == "") next
    sub(/^\*+/, "", verdict)
    if (index(verdict, "Passed") == 1) status = "pass"
    else if (index(verdict, "Not Run (Disabled)") == 1 || index(verdict, "Skipped") == 1) status = "skip"
    else if (index(verdict, "Not Run") == 1) status = "error"
    else if (index(verdict, "Failed") == 1 || index(verdict, "Timeout") == 1 || index(verdict, "Exception") == 1) status = "fail"
    else next
    record(name, status)
}
END { print_ids() }
