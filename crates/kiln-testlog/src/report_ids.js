// Reads the output of a test run on standard input and prints "[PASSED] <id>" or "[FAILED] <id>" for
// every test of the JSON report in it (jest or vitest --json: argument "jest"; mocha
// --reporter json: "mocha"), under the ids kiln gives them (js.rs: the report is the first JSON
// object with "testResults" or "stats" that starts a line; ids normalised as normalize.rs does,
// the same id kept at its worst status, "/testbed/" taken off as ParsedLog::relative_to does).
// The SWE-bench harness reads these lines with parse_log_jest_json. A test that was skipped
// prints nothing: the harness has no word for it in these lines.
// Node 12 and later; no single quote anywhere: sh quotes the program.
"use strict";
const fs = require("fs");

const mode = process.argv[process.argv.length - 1];
const log = fs.readFileSync(0, "utf8");
const key = mode === "mocha" ? "stats" : "testResults";

// The end of the JSON value that starts at `start` (just past its closing brace), or -1.
function valueEnd(text, start) {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === "\"") inString = false;
    } else if (c === "\"") inString = true;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

function findReport() {
  let attempts = 0;
  let offset = 0;
  for (const line of log.split(/(?<=\n)/)) {
    const start = offset + (line.length - line.trimStart().length);
    offset += line.length;
    if (!line.trimStart().startsWith("{")) continue;
    attempts++;
    if (attempts > 64) break;
    const end = valueEnd(log, start);
    if (end < 0) continue;
    try {
      const value = JSON.parse(log.slice(start, end));
      if (value && typeof value === "object" && !Array.isArray(value) && key in value) return value;
    } catch (e) {
      // Not JSON after all: the next line that starts with a brace may be.
    }
  }
  return null;
}

const ANSI = /\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])/g;
const TIMING = /(?:\s+\(\d+(?:\.\d+)?\s*(?:ns|us|µs|ms|s|sec|secs|seconds?|m|min)\)|\s+\[\d+(?:\.\d+)?\s*(?:ms|s)\]|\s+in\s+\d+(?:\.\d+)?\s*(?:ns|us|µs|ms|s|sec|seconds?))$/g;
const TEMP = /(?:\/private)?(?:\/var\/folders\/[^/\s]+\/[^/\s]+\/T|\/tmp)(?:\/pytest-of-[^/\s\]]+\/pytest-\d+(?:\/[^/\s\]]+)?|\/\.?tmp[A-Za-z0-9_]{6,}|\/go-build\d+)/g;
const SEVERITY = { skip: 0, pass: 1, fail: 2, error: 3 };

function normalize(raw) {
  let text = raw.replace(ANSI, "").trim();
  text = text.replace(TIMING, "");
  text = text.trimEnd().replace(TEMP, "<tmp>");
  return text.trim();
}

const statuses = new Map();
function record(raw, status) {
  const id = normalize(raw);
  if (id === "") return;
  const old = statuses.get(id);
  if (old === undefined || SEVERITY[status] > SEVERITY[old]) statuses.set(id, status);
}

const text = (value, name) => (value && typeof value[name] === "string" ? value[name] : "");
const array = (value, name) => (value && Array.isArray(value[name]) ? value[name] : []);

const report = findReport();
if (report && mode === "mocha") {
  for (const [name, status] of [["passes", "pass"], ["failures", "fail"], ["pending", "skip"]]) {
    for (const test of array(report, name)) {
      const title = text(test, "fullTitle");
      const id = test && typeof test.file === "string" ? test.file + "::" + title : title;
      const hook = status === "fail" && text(test, "title").includes("\" hook");
      record(id, hook ? "error" : status);
    }
  }
} else if (report) {
  for (const file of array(report, "testResults")) {
    const path = text(file, "name");
    const tests = array(file, "assertionResults");
    if (tests.length === 0 && text(file, "status") === "failed") {
      record(path, "error");
      continue;
    }
    for (const test of tests) {
      const titles = array(test, "ancestorTitles").filter((t) => typeof t === "string");
      titles.push(text(test, "title"));
      const verdict = text(test, "status");
      const status = verdict === "passed" ? "pass" : verdict === "failed" ? "fail" : "skip";
      record(path + "::" + titles.join(" › "), status);
    }
  }
}

let ids = statuses;
if ([...statuses.keys()].some((id) => id.startsWith("/testbed/"))) {
  ids = new Map();
  for (const [raw, status] of statuses) {
    const id = raw.startsWith("/testbed/") ? raw.slice("/testbed/".length) : raw;
    const old = ids.get(id);
    if (old === undefined || SEVERITY[status] > SEVERITY[old]) ids.set(id, status);
  }
}
const out = [];
for (const [id, status] of ids) {
  if (status === "pass") out.push("[PASSED] " + id);
  else if (status !== "skip") out.push("[FAILED] " + id);
}
if (out.length) process.stdout.write(out.join("\n") + "\n");
