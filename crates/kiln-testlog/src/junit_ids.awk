# JUnit XML reports (junit.rs) in the test output: every <testcase> of every document, its id
# "classname::name" (or "name" alone when the classname is empty or the name itself), passed
# unless a <failure> or <error> child says otherwise, skipped with a <skipped> child (one of
# type "pytest.xfail" is a pass) or a status/result attribute saying it did not run, failed
# when its document breaks off inside it. Comments and CDATA sections are dropped first, so
# that text in them is never read as a tag. Entities in attribute values are decoded (the
# five named ones and numeric ASCII ones). A report read differently from kiln costs the row
# its harness parser, never a wrong grade: validation compares. POSIX awk; no single quote.
function decode(s,   out, at, semi, name, code) {
    out = ""
    while ((at = index(s, "&")) > 0) {
        out = out substr(s, 1, at - 1)
        s = substr(s, at)
        semi = index(s, ";")
        name = semi > 0 ? substr(s, 2, semi - 2) : ""
        if (name == "lt") code = "<"
        else if (name == "gt") code = ">"
        else if (name == "amp") code = "&"
        else if (name == "quot") code = "\""
        else if (name == "apos") code = sprintf("%c", 39)
        else if (name ~ /^#[0-9]+$/ && substr(name, 2) + 0 < 128) code = sprintf("%c", substr(name, 2) + 0)
        else code = ""
        if (code == "") {
            out = out "&"
            s = substr(s, 2)
        } else {
            out = out code
            s = substr(s, semi + 1)
        }
    }
    return out s
}
# Value of attribute `key` in the text of a start tag, decoded; "" when absent.
function xml_attr(tag, key,   rest, at, before, quote, value) {
    rest = tag
    while (match(rest, "[[:space:]]" key "[[:space:]]*=[[:space:]]*[\"" sprintf("%c", 39) "]")) {
        quote = substr(rest, RSTART + RLENGTH - 1, 1)
        rest = substr(rest, RSTART + RLENGTH)
        at = index(rest, quote)
        if (at == 0) return ""
        value = substr(rest, 1, at - 1)
        gsub(/[\t\n\r]/, " ", value)
        return decode(value)
    }
    return ""
}
function strip(text, open, closing,   out, at, end) {
    out = ""
    while ((at = index(text, open)) > 0) {
        out = out substr(text, 1, at - 1)
        text = substr(text, at + length(open))
        end = index(text, closing)
        if (end == 0) return out
        text = substr(text, end + length(closing))
    }
    return out text
}
function scan(doc,   at, rest, end, tag, name, class, status, body, closing, child, ctag, type, worse) {
    doc = strip(strip(doc, "<!--", "-->"), "<![CDATA[", "]]>")
    # Only what follows the first <testsuites or <testsuite is a report.
    at = index(doc, "<testsuite")
    if (at == 0) return
    rest = substr(doc, at)
    while ((at = index(rest, "<testcase")) > 0) {
        rest = substr(rest, at + 9)
        if (substr(rest, 1, 1) !~ /[[:space:]\/>]/) continue
        end = index(rest, ">")
        if (end == 0) return
        tag = " " substr(rest, 1, end - 1)
        rest = substr(rest, end + 1)
        name = xml_attr(tag, "name")
        class = xml_attr(tag, "classname")
        name = (class != "" && class != name) ? class "::" name : name
        status = ""
        if (xml_attr(tag, "status") ~ /^(notrun|disabled|skipped)$/ || xml_attr(tag, "result") ~ /^(skipped|suppressed)$/) status = "skip"
        if (substr(tag, length(tag)) == "/") {
            record(name, status == "" ? "pass" : status)
            continue
        }
        closing = index(rest, "</testcase")
        if (closing == 0) {
            # The document broke off inside this test case: it did not finish.
            record(name, "error")
            return
        }
        body = substr(rest, 1, closing - 1)
        rest = substr(rest, closing)
        while (match(body, /<(failure|error|skipped)[[:space:]\/>]/)) {
            child = substr(body, RSTART + 1, RLENGTH - 2)
            body = substr(body, RSTART + RLENGTH - 1)
            end = index(body, ">")
            ctag = " " substr(body, 1, end > 0 ? end - 1 : length(body))
            type = xml_attr(ctag, "type")
            if (child == "failure") child = "fail"
            else if (child == "skipped" && type == "pytest.xfail") child = "pass"
            else if (child == "skipped") child = "skip"
            worse = (status == "fail" || status == "error") ? (child == "error") : 1
            if (worse) status = child
        }
        record(name, status == "" ? "pass" : status)
    }
}
{ text = text $0 "\n" }
END {
    # Each <?xml declaration starts a document (text before the first is none); without one,
    # the whole output is scanned as one.
    at = index(text, "<?xml")
    if (at == 0) {
        scan(text)
    } else {
        text = substr(text, at + 5)
        while ((at = index(text, "<?xml")) > 0) {
            scan(substr(text, 1, at - 1))
            text = substr(text, at + 5)
        }
        scan(text)
    }
    print_ids()
}
