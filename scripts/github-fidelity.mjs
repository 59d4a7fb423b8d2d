// Checks the fake GitHub (kiln-testkit) and kiln's crawl against GitHub's own published
// artifacts, from what a test recorded:
//
//   node scripts/github-fidelity.mjs DIR
//
// DIR/graphql.json  [{query, variables, response}] every GraphQL exchange of the test
// DIR/rest.json     [{method, path, status, body}] every REST answer of the fake
//
// - Every query kiln sent must validate against GitHub's schema (@octokit/graphql-schema), and
//   its variables must coerce to the declared types.
// - Every answer of the fake must be a result GitHub's schema allows for that query: the
//   answer's data is executed against the schema as the root value (each field read from the
//   answer by its response key), so a missing non-null field, a wrong scalar, an unknown enum
//   value or a list where an object belongs is an error, and the completed result must equal
//   the answer.
// - Every REST answer must match its operation's response schema in GitHub's OpenAPI
//   description (@octokit/openapi, api.github.com.json).
//
// Node modules come from KILN_NODE_MODULES (installed by scripts/node-deps.sh). Exits non-zero
// with one line per problem.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const modules = process.env.KILN_NODE_MODULES;
if (!modules) {
  console.error("github-fidelity: set KILN_NODE_MODULES (scripts/node-deps.sh prints it)");
  process.exit(2);
}
const require = createRequire(path.join(modules, "node_modules", "noop.js"));
const graphql = require("graphql");
const Ajv = require("ajv");
const addFormats = require("ajv-formats");

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node scripts/github-fidelity.mjs DIR");
  process.exit(2);
}

const problems = [];
const schemaText = readFileSync(
  path.join(modules, "node_modules/@octokit/graphql-schema/schema.graphql"),
  "utf8",
);
const schema = graphql.buildSchema(schemaText, { assumeValidSDL: true });

// Reads a field from the recorded answer by its response key (the alias when there is one).
const fieldResolver = (source, _args, _context, info) => {
  if (source === null || typeof source !== "object") return undefined;
  return source[info.path.key];
};
// Abstract types (unions, interfaces) resolve by the recorded __typename.
const typeResolver = (value) => (value && value.__typename) || undefined;

const canonical = (value) => {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical(value[k])]));
  }
  return value;
};

let queries = 0;
const exchanges = JSON.parse(readFileSync(path.join(dir, "graphql.json"), "utf8"));
for (const [n, exchange] of exchanges.entries()) {
  const where = `graphql #${n + 1}`;
  let document;
  try {
    document = graphql.parse(exchange.query);
  } catch (e) {
    problems.push(`${where}: the query does not parse: ${e.message}`);
    continue;
  }
  const errors = graphql.validate(schema, document);
  for (const e of errors) problems.push(`${where}: ${e.message}`);
  if (errors.length) continue;
  queries += 1;
  const operation = document.definitions.find((d) => d.kind === "OperationDefinition");
  // Variables are coerced to their declared types inside execute(); a wrong one is an error
  // of the result below.
  const response = exchange.response || {};
  if (!response.data) {
    // An answer of errors only (a rate limit, an unknown field) has no data to check; its
    // shape is GitHub's: a list of objects with a message.
    const ok = Array.isArray(response.errors) && response.errors.every((e) => typeof e.message === "string");
    if (!ok) problems.push(`${where}: an answer without data must carry errors with messages`);
    continue;
  }
  const result = graphql.executeSync({
    schema,
    document,
    rootValue: response.data,
    variableValues: exchange.variables || {},
    operationName: operation && operation.name ? operation.name.value : undefined,
    fieldResolver,
    typeResolver,
  });
  for (const e of result.errors || []) {
    problems.push(`${where} (${operation?.name?.value}): the answer breaks the schema at ${JSON.stringify(e.path)}: ${e.message}`);
  }
  if (!result.errors) {
    // Object key order is not compared: the fake's JSON keeps keys sorted, GitHub's follows
    // the selection, and no client may depend on either.
    const expected = JSON.stringify(canonical(response.data));
    const completed = JSON.stringify(canonical(result.data));
    if (expected !== completed) {
      problems.push(`${where}: the schema completes the answer differently:\n  answer:    ${expected.slice(0, 300)}\n  completed: ${completed.slice(0, 300)}`);
    }
  }
}

// REST: response schemas of the operations the fake serves.
const openapi = JSON.parse(
  readFileSync(path.join(modules, "node_modules/@octokit/openapi/generated/api.github.com.json"), "utf8"),
);
const ajv = new Ajv({ strict: false, allErrors: true });
// GitHub's formats: uri, date-time, email; int64 is a number (JSON Schema has no such format).
addFormats(ajv);
ajv.addFormat("int64", { type: "number", validate: Number.isSafeInteger });
ajv.addSchema({ $id: "openapi", components: openapi.components });
const resolve = (node) => {
  while (node && node.$ref) {
    const parts = node.$ref.replace(/^#\//, "").split("/");
    node = parts.reduce((o, k) => o && o[k], openapi);
  }
  return node;
};
const templates = Object.keys(openapi.paths).map((p) => ({
  template: p,
  regex: new RegExp("^" + p.replace(/\{[^}]+\}/g, "[^/]+") + "$"),
}));
let answers = 0;
const rest = JSON.parse(readFileSync(path.join(dir, "rest.json"), "utf8"));
for (const [n, answer] of rest.entries()) {
  const where = `rest #${n + 1} ${answer.method} ${answer.path} ${answer.status}`;
  if (answer.status === 304) continue; // no body
  const match = templates.find((t) => t.regex.test(answer.path));
  if (!match) {
    problems.push(`${where}: no such path in GitHub's OpenAPI description`);
    continue;
  }
  const operation = openapi.paths[match.template][answer.method.toLowerCase()];
  if (!operation) {
    problems.push(`${where}: GitHub's ${match.template} has no ${answer.method}`);
    continue;
  }
  const response = resolve(operation.responses[String(answer.status)]);
  if (!response) {
    problems.push(`${where}: GitHub's ${answer.method} ${match.template} never answers ${answer.status}`);
    continue;
  }
  const media = response.content && response.content["application/json"];
  if (!media) continue;
  const ref = media.schema.$ref
    ? media.schema.$ref.replace(/^#/, "openapi#")
    : null;
  const validate = ref ? ajv.getSchema(ref) : ajv.compile(media.schema);
  if (!validate) {
    problems.push(`${where}: cannot compile the response schema`);
    continue;
  }
  answers += 1;
  if (!validate(answer.body)) {
    for (const e of validate.errors.slice(0, 10)) {
      problems.push(`${where}: ${e.instancePath || "/"} ${e.message} (${e.schemaPath})`);
    }
  }
}

if (problems.length) {
  console.error(problems.join("\n"));
  process.exit(1);
}
console.log(`github-fidelity: ${queries} queries and their answers fit GitHub's GraphQL schema; ${answers} REST answers fit GitHub's OpenAPI description`);
