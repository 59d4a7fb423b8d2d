//! A GraphQL executor over the fake's repositories, for the part of GitHub's schema kiln uses.
//!
//! It answers whatever selection a client sends (aliases, inline fragments, named fragments,
//! variables), field by field, so a client asking for a field the fake does not know gets
//! GitHub's `undefinedField` error instead of silence. Field names, types and nullability follow
//! GitHub's schema; CI checks the queries clients sent and the answers given here against
//! `@octokit/graphql-schema`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use graphql_parser::query::{
    Definition, Field, FragmentDefinition, OperationDefinition, Selection, SelectionSet,
    TypeCondition, Value as GqlValue,
};
use serde_json::{Map, Value, json};

use super::encoding::{base64_decode, base64_encode, cursor, decode_cursor};
use super::model::{FakeComment, FakeFile, FakeIssue, FakePull, FakeRepo, github_time};
use super::search::SearchTerms;

/// Largest number of results a search pages through, as on GitHub.
const SEARCH_CAP: usize = 1000;

/// What a parsed document needs before it runs: its cost in points (GitHub's rule: the requests
/// needed to fill every connection at its `first` size, divided by 100, at least 1).
pub(super) struct Prepared<'q> {
    operation: SelectionSet<'q, &'q str>,
    fragments: BTreeMap<&'q str, FragmentDefinition<'q, &'q str>>,
    /// Points the query costs.
    pub cost: u64,
}

/// Parses `query`; a syntax error is GitHub's `{"errors": [...]}` answer.
pub(super) fn prepare<'q>(query: &'q str, variables: &Value) -> Result<Prepared<'q>, Value> {
    let document = graphql_parser::parse_query::<&str>(query)
        .map_err(|e| error_answer(&format!("Parse error: {e}"), "parseError"))?;
    let mut operation = None;
    let mut fragments = BTreeMap::new();
    for definition in document.definitions {
        match definition {
            Definition::Operation(OperationDefinition::Query(q)) => {
                operation = Some(q.selection_set)
            }
            Definition::Operation(OperationDefinition::SelectionSet(s)) => operation = Some(s),
            Definition::Operation(_) => {
                return Err(error_answer(
                    "The fake GitHub answers queries only",
                    "unsupportedOperation",
                ));
            }
            Definition::Fragment(f) => {
                fragments.insert(f.name, f);
            }
        }
    }
    let operation =
        operation.ok_or_else(|| error_answer("No operation in the document", "noOperation"))?;
    let vars = variables.as_object().cloned().unwrap_or_default();
    let requests = connection_requests(&operation, &fragments, &vars, 1);
    Ok(Prepared {
        cost: (requests / 100).max(1),
        operation,
        fragments,
    })
}

/// Sum over connections of the requests GitHub counts for them (the product of the `first`
/// sizes of the connections around them).
fn connection_requests<'a>(
    set: &SelectionSet<'a, &'a str>,
    fragments: &BTreeMap<&'a str, FragmentDefinition<'a, &'a str>>,
    vars: &Map<String, Value>,
    parents: u64,
) -> u64 {
    let mut total = 0;
    for item in &set.items {
        match item {
            Selection::Field(field) => {
                let first = field
                    .arguments
                    .iter()
                    .find(|(name, _)| *name == "first")
                    .and_then(|(_, v)| value_of(v, vars).as_u64());
                match first {
                    Some(first) => {
                        total += parents;
                        total += connection_requests(
                            &field.selection_set,
                            fragments,
                            vars,
                            parents * first,
                        );
                    }
                    None => {
                        total += connection_requests(&field.selection_set, fragments, vars, parents)
                    }
                }
            }
            Selection::InlineFragment(inline) => {
                total += connection_requests(&inline.selection_set, fragments, vars, parents);
            }
            Selection::FragmentSpread(spread) => {
                if let Some(f) = fragments.get(spread.fragment_name) {
                    total += connection_requests(&f.selection_set, fragments, vars, parents);
                }
            }
        }
    }
    total
}

/// Quota figures for the `rateLimit` field.
#[derive(Debug, Clone, Copy)]
pub(super) struct RateInfo {
    pub cost: u64,
    pub limit: u64,
    pub remaining: u64,
    pub reset_at: DateTime<Utc>,
}

/// Runs a prepared document. Any field error makes the whole answer errors only, as GitHub's
/// validation does before it runs a query.
pub(super) fn execute(
    prepared: &Prepared<'_>,
    repos: &[FakeRepo],
    variables: &Value,
    rate: RateInfo,
) -> Value {
    let vars = variables.as_object().cloned().unwrap_or_default();
    let mut run = Run {
        repos,
        vars: &vars,
        fragments: &prepared.fragments,
        errors: Vec::new(),
        rate,
    };
    let data = run.select(&Node::Query, &prepared.operation, &mut Vec::new());
    if run.errors.is_empty() {
        json!({ "data": data })
    } else {
        json!({ "errors": run.errors })
    }
}

fn error_answer(message: &str, code: &str) -> Value {
    json!({"errors": [{"message": message, "extensions": {"code": code}}]})
}

/// An object of the schema, borrowed from the model.
#[derive(Clone)]
enum Node<'m> {
    Query,
    RateLimit,
    Repository(&'m FakeRepo),
    PullRequest(&'m FakeRepo, &'m FakePull),
    Issue(&'m FakeRepo, &'m FakeIssue),
    Comment(&'m FakeComment),
    Actor(&'m str),
    File(&'m FakeFile),
    PullRequestCommit(&'m FakePull),
    Commit(&'m str, Option<(DateTime<Utc>, DateTime<Utc>)>),
    Language(&'m str),
    LanguageEdge(&'m str, u64),
    Ref(&'m str),
    /// A connection: its GraphQL type name, one page of nodes, the total, paging, and extra
    /// scalar fields (`totalSize`, `issueCount`).
    Connection {
        typename: &'static str,
        nodes: Vec<Node<'m>>,
        edges_of: Option<&'static str>,
        total: u64,
        has_next: bool,
        start: usize,
        extra: Map<String, Value>,
    },
    PageInfo {
        has_next: bool,
        has_previous: bool,
        start_cursor: Option<String>,
        end_cursor: Option<String>,
    },
}

impl Node<'_> {
    fn typename(&self) -> &'static str {
        match self {
            Self::Query => "Query",
            Self::RateLimit => "RateLimit",
            Self::Repository(_) => "Repository",
            Self::PullRequest(..) => "PullRequest",
            Self::Issue(..) => "Issue",
            Self::Comment(_) => "IssueComment",
            Self::Actor(_) => "User",
            Self::File(_) => "PullRequestChangedFile",
            Self::PullRequestCommit(_) => "PullRequestCommit",
            Self::Commit(..) => "Commit",
            Self::Language(_) => "Language",
            Self::LanguageEdge(..) => "LanguageEdge",
            Self::Ref(_) => "Ref",
            Self::Connection { typename, .. } => typename,
            Self::PageInfo { .. } => "PageInfo",
        }
    }

    /// Whether an inline fragment `... on <condition>` applies (types and the interfaces and
    /// unions they belong to).
    fn matches(&self, condition: &str) -> bool {
        let name = self.typename();
        condition == name
            || match self {
                Self::Issue(..) | Self::PullRequest(..) => matches!(
                    condition,
                    "Node" | "IssueOrPullRequest" | "SearchResultItem" | "Closable" | "Comment"
                ),
                Self::Repository(_) => matches!(condition, "Node" | "SearchResultItem"),
                Self::Actor(_) => matches!(condition, "Actor"),
                _ => false,
            }
    }
}

/// What a field resolves to.
enum Resolved<'m> {
    Scalar(Value),
    Object(Node<'m>),
    List(Vec<Node<'m>>),
}

struct Run<'m, 'q> {
    repos: &'m [FakeRepo],
    vars: &'m Map<String, Value>,
    fragments: &'m BTreeMap<&'q str, FragmentDefinition<'q, &'q str>>,
    errors: Vec<Value>,
    rate: RateInfo,
}

fn value_of<'a>(value: &GqlValue<'a, &'a str>, vars: &Map<String, Value>) -> Value {
    match value {
        GqlValue::Variable(name) => vars.get(*name).cloned().unwrap_or(Value::Null),
        GqlValue::Int(n) => n.as_i64().map_or(Value::Null, Value::from),
        GqlValue::Float(f) => json!(f),
        GqlValue::String(s) => Value::String(s.clone()),
        GqlValue::Boolean(b) => Value::Bool(*b),
        GqlValue::Null => Value::Null,
        GqlValue::Enum(e) => Value::String((*e).to_string()),
        GqlValue::List(items) => Value::Array(items.iter().map(|v| value_of(v, vars)).collect()),
        GqlValue::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| ((*k).to_string(), value_of(v, vars)))
                .collect(),
        ),
    }
}

impl<'m> Run<'m, '_> {
    fn select<'a>(
        &mut self,
        node: &Node<'m>,
        set: &SelectionSet<'a, &'a str>,
        path: &mut Vec<String>,
    ) -> Value {
        let mut out = Map::new();
        self.select_into(node, set, path, &mut out);
        Value::Object(out)
    }

    fn select_into<'a>(
        &mut self,
        node: &Node<'m>,
        set: &SelectionSet<'a, &'a str>,
        path: &mut Vec<String>,
        out: &mut Map<String, Value>,
    ) {
        for item in &set.items {
            match item {
                Selection::Field(field) => {
                    let key = field.alias.unwrap_or(field.name).to_string();
                    path.push(key.clone());
                    let value = self.field_value(node, field, path);
                    path.pop();
                    out.insert(key, value);
                }
                Selection::InlineFragment(inline) => {
                    let applies = match &inline.type_condition {
                        Some(TypeCondition::On(name)) => node.matches(name),
                        None => true,
                    };
                    if applies {
                        self.select_into(node, &inline.selection_set, path, out);
                    }
                }
                Selection::FragmentSpread(spread) => {
                    let Some(fragment) = self.fragments.get(spread.fragment_name) else {
                        self.errors.push(json!({"message": format!("Fragment {} was used, but not defined", spread.fragment_name), "extensions": {"code": "useAndDefineFragment"}}));
                        continue;
                    };
                    let TypeCondition::On(condition) = &fragment.type_condition;
                    if node.matches(condition) {
                        let set = fragment.selection_set.clone();
                        self.select_into(node, &set, path, out);
                    }
                }
            }
        }
    }

    fn field_value<'a>(
        &mut self,
        node: &Node<'m>,
        field: &Field<'a, &'a str>,
        path: &mut Vec<String>,
    ) -> Value {
        if field.name == "__typename" {
            return Value::String(node.typename().into());
        }
        let args: Map<String, Value> = field
            .arguments
            .iter()
            .map(|(k, v)| ((*k).to_string(), value_of(v, self.vars)))
            .collect();
        match self.resolve(node, field.name, &args) {
            Ok(Resolved::Scalar(value)) => value,
            Ok(Resolved::Object(child)) => self.select(&child, &field.selection_set, path),
            Ok(Resolved::List(children)) => Value::Array(
                children
                    .iter()
                    .map(|c| self.select(c, &field.selection_set, path))
                    .collect(),
            ),
            Err(FieldError::Undefined) => {
                let type_name = node.typename();
                self.errors.push(json!({
                    "path": path.clone(),
                    "extensions": {"code": "undefinedField", "typeName": type_name, "fieldName": field.name},
                    "locations": [{"line": field.position.line, "column": field.position.column}],
                    "message": format!("Field '{}' doesn't exist on type '{type_name}'", field.name),
                }));
                Value::Null
            }
            Err(FieldError::NotFound(message)) => {
                self.errors
                    .push(json!({"type": "NOT_FOUND", "path": path.clone(), "message": message}));
                Value::Null
            }
            Err(FieldError::Invalid(message)) => {
                self.errors.push(json!({"message": message, "path": path.clone(), "extensions": {"code": "argumentLiteralsIncompatible"}}));
                Value::Null
            }
        }
    }

    /// What `field` of `node` resolves to, with its arguments `args`: each kind of object
    /// has its own resolver, and a field no resolver knows is GitHub's `undefinedField`.
    fn resolve(
        &self,
        node: &Node<'m>,
        field: &str,
        args: &Map<String, Value>,
    ) -> Result<Resolved<'m>, FieldError> {
        match node {
            Node::Query | Node::RateLimit => self.resolve_root(node, field, args),
            Node::Repository(_) | Node::Language(_) | Node::LanguageEdge(..) | Node::Ref(_) => {
                resolve_repository(node, field, args)
            }
            Node::PullRequest(..)
            | Node::PullRequestCommit(_)
            | Node::Commit(..)
            | Node::File(_) => self.resolve_pull_request(node, field, args),
            Node::Issue(..) | Node::Comment(_) | Node::Actor(_) => resolve_issue(node, field, args),
            Node::Connection { .. } | Node::PageInfo { .. } => resolve_connection(node, field),
        }
    }

    /// The fields of the query root and of `rateLimit`.
    fn resolve_root(
        &self,
        node: &Node<'m>,
        field: &str,
        args: &Map<String, Value>,
    ) -> Result<Resolved<'m>, FieldError> {
        match (node, field) {
            (Node::Query, "rateLimit") => object(Node::RateLimit),
            (Node::Query, "search") => self.search(args),
            (Node::Query, "repository") => {
                let owner = args
                    .get("owner")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
                let full = format!("{owner}/{name}");
                match self
                    .repos
                    .iter()
                    .find(|r| r.full_name.eq_ignore_ascii_case(&full))
                {
                    Some(repo) => object(Node::Repository(repo)),
                    None => Err(FieldError::NotFound(format!(
                        "Could not resolve to a Repository with the name '{full}'."
                    ))),
                }
            }
            (Node::Query, "node") => {
                let id = args.get("id").and_then(Value::as_str).unwrap_or_default();
                match self.node_by_id(id) {
                    Some(found) => object(found),
                    None => Err(FieldError::NotFound(format!(
                        "Could not resolve to a node with the global id of '{id}'"
                    ))),
                }
            }
            (Node::RateLimit, "cost") => scalar(json!(self.rate.cost)),
            (Node::RateLimit, "limit") => scalar(json!(self.rate.limit)),
            (Node::RateLimit, "remaining") => scalar(json!(self.rate.remaining)),
            (Node::RateLimit, "used") => scalar(json!(self.rate.limit - self.rate.remaining)),
            (Node::RateLimit, "resetAt") => scalar(json!(github_time(&self.rate.reset_at))),
            (Node::RateLimit, "nodeCount") => scalar(json!(0)),
            _ => Err(FieldError::Undefined),
        }
    }

    /// The fields of a pull request, its first commit, its merge commit and its files.
    fn resolve_pull_request(
        &self,
        node: &Node<'m>,
        field: &str,
        args: &Map<String, Value>,
    ) -> Result<Resolved<'m>, FieldError> {
        match (node, field) {
            (Node::PullRequest(_, p), "number") => scalar(json!(p.number)),
            (Node::PullRequest(r, p), "id") => scalar(json!(node_id(
                "PullRequest",
                &format!("{}#{}", r.full_name, p.number)
            ))),
            (Node::PullRequest(_, p), "title") => scalar(json!(p.title)),
            (Node::PullRequest(_, p), "body") => scalar(json!(p.body)),
            (Node::PullRequest(r, p), "url") => scalar(json!(format!(
                "https://github.com/{}/pull/{}",
                r.full_name, p.number
            ))),
            (Node::PullRequest(_, p), "createdAt") => scalar(json!(github_time(&p.created_at))),
            (Node::PullRequest(_, p), "mergedAt") => {
                scalar(p.merged_at.map_or(Value::Null, |t| json!(github_time(&t))))
            }
            (Node::PullRequest(_, p), "merged") => scalar(json!(p.merged_at.is_some())),
            (Node::PullRequest(_, p), "state") => scalar(json!(if p.merged_at.is_some() {
                "MERGED"
            } else {
                "CLOSED"
            })),
            (Node::PullRequest(_, p), "baseRefName") => scalar(json!(p.base_ref)),
            (Node::PullRequest(_, p), "baseRefOid") => scalar(json!(p.base_oid)),
            (Node::PullRequest(_, p), "headRefOid") => scalar(json!(p.head_oid)),
            (Node::PullRequest(_, p), "mergeCommit") => Ok(match &p.merge_oid {
                Some(oid) => Resolved::Object(Node::Commit(oid, None)),
                None => Resolved::Scalar(Value::Null),
            }),
            (Node::PullRequest(_, p), "additions") => {
                scalar(json!(p.files.iter().map(|f| f.additions).sum::<u64>()))
            }
            (Node::PullRequest(_, p), "deletions") => {
                scalar(json!(p.files.iter().map(|f| f.deletions).sum::<u64>()))
            }
            (Node::PullRequest(_, p), "changedFiles") => scalar(json!(p.files.len())),
            (Node::PullRequest(r, _), "repository") => object(Node::Repository(r)),
            (Node::PullRequest(_, p), "files") => object(page(
                "PullRequestChangedFileConnection",
                p.files.iter().map(Node::File).collect(),
                args,
            )?),
            (Node::PullRequest(_, p), "commits") => object(page(
                "PullRequestCommitConnection",
                vec![Node::PullRequestCommit(p)],
                args,
            )?),
            (Node::PullRequest(_, p), "closingIssuesReferences") => {
                let issues: Vec<Node<'m>> = p
                    .closing_issues
                    .iter()
                    .filter_map(|(repo, number)| {
                        let repo = self
                            .repos
                            .iter()
                            .find(|r| r.full_name.eq_ignore_ascii_case(repo))?;
                        repo.issue(*number).map(|i| Node::Issue(repo, i))
                    })
                    .collect();
                object(page("IssueConnection", issues, args)?)
            }
            (Node::PullRequestCommit(p), "commit") => object(Node::Commit(
                &p.first_commit.0,
                Some((p.first_commit.1, p.first_commit.2)),
            )),
            (Node::Commit(oid, _), "oid") => scalar(json!(oid)),
            (Node::Commit(_, Some((authored, _))), "authoredDate") => {
                scalar(json!(github_time(authored)))
            }
            (Node::Commit(_, Some((_, committed))), "committedDate") => {
                scalar(json!(github_time(committed)))
            }
            (Node::File(f), "path") => scalar(json!(f.path)),
            (Node::File(f), "additions") => scalar(json!(f.additions)),
            (Node::File(f), "deletions") => scalar(json!(f.deletions)),
            (Node::File(f), "changeType") => scalar(json!(f.change_type)),
            _ => Err(FieldError::Undefined),
        }
    }

    fn node_by_id(&self, id: &str) -> Option<Node<'m>> {
        let text = String::from_utf8(base64_decode(
            id.split_once('_').map_or(id, |(_, rest)| rest),
        )?)
        .ok()?;
        let (kind, rest) = text.split_once(':')?;
        let (repo_name, number) = rest.rsplit_once('#')?;
        let repo = self.repos.iter().find(|r| r.full_name == repo_name)?;
        let number: u64 = number.parse().ok()?;
        match kind {
            "Issue" => repo.issue(number).map(|i| Node::Issue(repo, i)),
            "PullRequest" => repo.pull(number).map(|p| Node::PullRequest(repo, p)),
            _ => None,
        }
    }

    fn search(&self, args: &Map<String, Value>) -> Result<Resolved<'m>, FieldError> {
        let text = args
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = args.get("type").and_then(Value::as_str).unwrap_or_default();
        let terms = SearchTerms::parse(text).map_err(FieldError::Invalid)?;
        let (results, count_field, typename): (Vec<Node<'m>>, &str, &'static str) = match kind {
            "ISSUE" => (
                self.search_pulls(&terms)?,
                "issueCount",
                "SearchResultItemConnection",
            ),
            "REPOSITORY" => (
                self.search_repositories(&terms)?,
                "repositoryCount",
                "SearchResultItemConnection",
            ),
            other => {
                return Err(FieldError::Invalid(format!(
                    "Search type {other} is not served by the fake GitHub"
                )));
            }
        };
        let count = results.len();
        let capped: Vec<Node<'m>> = results.into_iter().take(SEARCH_CAP).collect();
        let mut connection = page(typename, capped, args)?;
        if let Node::Connection { extra, .. } = &mut connection {
            for name in [
                "issueCount",
                "repositoryCount",
                "userCount",
                "wikiCount",
                "codeCount",
                "discussionCount",
            ] {
                extra.insert(
                    name.into(),
                    json!(if name == count_field { count } else { 0 }),
                );
            }
        }
        Ok(Resolved::Object(connection))
    }

    fn search_pulls(&self, terms: &SearchTerms) -> Result<Vec<Node<'m>>, FieldError> {
        let mut found = Vec::new();
        for repo in self.repos {
            if let Some(wanted) = &terms.repo
                && !repo.full_name.eq_ignore_ascii_case(wanted)
            {
                continue;
            }
            for pull in &repo.pulls {
                let merged_ok = match (terms.merged, pull.merged_at) {
                    (Some(_), None) => false,
                    (Some((from, to)), Some(at)) => {
                        from.is_none_or(|f| at >= f) && to.is_none_or(|t| at <= t)
                    }
                    (None, _) => !terms.is_merged || pull.merged_at.is_some(),
                };
                if merged_ok && (!terms.is_merged || pull.merged_at.is_some()) {
                    found.push((pull.created_at, pull.number, Node::PullRequest(repo, pull)));
                }
            }
        }
        match terms.sort.as_deref() {
            Some("created-asc") => found.sort_by_key(|(t, n, _)| (*t, *n)),
            _ => found.sort_by_key(|(t, n, _)| std::cmp::Reverse((*t, *n))),
        }
        Ok(found.into_iter().map(|(_, _, n)| n).collect())
    }

    fn search_repositories(&self, terms: &SearchTerms) -> Result<Vec<Node<'m>>, FieldError> {
        let mut found: Vec<&FakeRepo> = self
            .repos
            .iter()
            .filter(|r| {
                terms.language.as_ref().is_none_or(|l| {
                    r.language
                        .as_deref()
                        .is_some_and(|rl| rl.eq_ignore_ascii_case(l))
                }) && terms
                    .stars
                    .is_none_or(|(lo, hi)| r.stars >= lo && r.stars <= hi)
                    && terms.forks_at_least.is_none_or(|f| r.forks >= f)
                    && terms.archived.is_none_or(|a| r.archived == a)
                    && terms.fork.is_none_or(|f| r.fork == f)
                    && terms.pushed_since.is_none_or(|p| r.pushed_at >= p)
            })
            .collect();
        found.sort_by(|a, b| {
            b.stars
                .cmp(&a.stars)
                .then_with(|| a.full_name.cmp(&b.full_name))
        });
        Ok(found.into_iter().map(Node::Repository).collect())
    }
}

/// The fields of a repository and of its languages and default branch.
fn resolve_repository<'m>(
    node: &Node<'m>,
    field: &str,
    args: &Map<String, Value>,
) -> Result<Resolved<'m>, FieldError> {
    match (node, field) {
        (Node::Repository(r), "nameWithOwner") => scalar(json!(r.full_name)),
        (Node::Repository(r), "name") => scalar(json!(r.name())),
        (Node::Repository(r), "owner") => object(Node::Actor(r.owner())),
        (Node::Repository(r), "url") => {
            scalar(json!(format!("https://github.com/{}", r.full_name)))
        }
        (Node::Repository(r), "id") => scalar(json!(node_id("Repository", &r.full_name))),
        (Node::Repository(r), "stargazerCount") => scalar(json!(r.stars)),
        (Node::Repository(r), "forkCount") => scalar(json!(r.forks)),
        (Node::Repository(r), "isArchived") => scalar(json!(r.archived)),
        (Node::Repository(r), "isFork") => scalar(json!(r.fork)),
        (Node::Repository(r), "createdAt") => scalar(json!(github_time(&r.created_at))),
        (Node::Repository(r), "pushedAt") => scalar(json!(github_time(&r.pushed_at))),
        (Node::Repository(r), "defaultBranchRef") => object(Node::Ref(&r.default_branch)),
        (Node::Repository(r), "primaryLanguage") => Ok(match &r.language {
            Some(l) => Resolved::Object(Node::Language(l)),
            None => Resolved::Scalar(Value::Null),
        }),
        (Node::Repository(r), "languages") => {
            let edges: Vec<Node<'m>> = r
                .languages
                .iter()
                .map(|(name, size)| Node::LanguageEdge(name, *size))
                .collect();
            let total_size: u64 = r.languages.iter().map(|(_, s)| s).sum();
            let mut connection = page("LanguageConnection", edges, args)?;
            if let Node::Connection {
                extra, edges_of, ..
            } = &mut connection
            {
                extra.insert("totalSize".into(), json!(total_size));
                *edges_of = Some("LanguageEdge");
            }
            object(connection)
        }
        (Node::Repository(r), "issueOrPullRequest" | "issue" | "pullRequest") => {
            let number = args.get("number").and_then(Value::as_u64).unwrap_or(0);
            let issue = r.issue(number).filter(|_| field != "pullRequest");
            let pull = r.pull(number).filter(|_| field != "issue");
            match (issue, pull) {
                (Some(i), _) => object(Node::Issue(r, i)),
                (None, Some(p)) => object(Node::PullRequest(r, p)),
                (None, None) => Err(FieldError::NotFound(format!(
                    "Could not resolve to an {} with the number of {number}.",
                    match field {
                        "issue" => "Issue",
                        "pullRequest" => "PullRequest",
                        _ => "IssueOrPullRequest",
                    }
                ))),
            }
        }
        (Node::Language(name), "name") => scalar(json!(name)),
        (Node::LanguageEdge(_, size), "size") => scalar(json!(size)),
        (Node::LanguageEdge(name, _), "node") => object(Node::Language(name)),
        (Node::Ref(name), "name") => scalar(json!(name)),
        _ => Err(FieldError::Undefined),
    }
}

/// The fields of an issue, its comments and their authors.
fn resolve_issue<'m>(
    node: &Node<'m>,
    field: &str,
    args: &Map<String, Value>,
) -> Result<Resolved<'m>, FieldError> {
    match (node, field) {
        (Node::Issue(r, i), "id") => scalar(json!(node_id(
            "Issue",
            &format!("{}#{}", r.full_name, i.number)
        ))),
        (Node::Issue(_, i), "number") => scalar(json!(i.number)),
        (Node::Issue(_, i), "title") => scalar(json!(i.title)),
        (Node::Issue(_, i), "body") => scalar(json!(i.body)),
        (Node::Issue(_, i), "createdAt") => scalar(json!(github_time(&i.created_at))),
        (Node::Issue(_, _), "state") => scalar(json!("CLOSED")),
        (Node::Issue(r, i), "url") => scalar(json!(format!(
            "https://github.com/{}/issues/{}",
            r.full_name, i.number
        ))),
        (Node::Issue(r, _), "repository") => object(Node::Repository(r)),
        (Node::Issue(_, i), "comments") => object(page(
            "IssueCommentConnection",
            i.comments.iter().map(Node::Comment).collect(),
            args,
        )?),
        (Node::Comment(c), "body") => scalar(json!(c.body)),
        (Node::Comment(c), "createdAt") => scalar(json!(github_time(&c.created_at))),
        (Node::Comment(c), "author") => object(Node::Actor(&c.author)),
        (Node::Actor(login), "login") => scalar(json!(login)),
        _ => Err(FieldError::Undefined),
    }
}

/// The fields of a connection (`nodes`, `edges`, `totalCount`, `pageInfo`, extra counts)
/// and of its page information.
fn resolve_connection<'m>(node: &Node<'m>, field: &str) -> Result<Resolved<'m>, FieldError> {
    match (node, field) {
        (
            Node::Connection {
                nodes,
                edges_of: None,
                ..
            },
            "nodes",
        ) => Ok(Resolved::List(nodes.clone())),
        (
            Node::Connection {
                nodes,
                edges_of: Some(_),
                ..
            },
            "edges",
        ) => Ok(Resolved::List(nodes.clone())),
        (
            Node::Connection {
                nodes,
                edges_of: Some(_),
                ..
            },
            "nodes",
        ) => Ok(Resolved::List(
            nodes
                .iter()
                .map(|edge| match edge {
                    Node::LanguageEdge(name, _) => Node::Language(name),
                    other => other.clone(),
                })
                .collect(),
        )),
        (Node::Connection { total, .. }, "totalCount") => scalar(json!(total)),
        (
            Node::Connection {
                nodes,
                has_next,
                start,
                ..
            },
            "pageInfo",
        ) => object(Node::PageInfo {
            has_next: *has_next,
            has_previous: *start > 0,
            start_cursor: (!nodes.is_empty()).then(|| cursor(*start + 1)),
            end_cursor: (!nodes.is_empty()).then(|| cursor(*start + nodes.len())),
        }),
        (Node::Connection { extra, .. }, name) if extra.contains_key(name) => {
            scalar(extra[name].clone())
        }
        (Node::PageInfo { has_next, .. }, "hasNextPage") => scalar(json!(has_next)),
        (Node::PageInfo { has_previous, .. }, "hasPreviousPage") => scalar(json!(has_previous)),
        (Node::PageInfo { start_cursor, .. }, "startCursor") => scalar(json!(start_cursor)),
        (Node::PageInfo { end_cursor, .. }, "endCursor") => scalar(json!(end_cursor)),
        _ => Err(FieldError::Undefined),
    }
}

/// A scalar field's value.
fn scalar<'m>(value: Value) -> Result<Resolved<'m>, FieldError> {
    Ok(Resolved::Scalar(value))
}

/// An object field's value.
fn object(node: Node<'_>) -> Result<Resolved<'_>, FieldError> {
    Ok(Resolved::Object(node))
}

enum FieldError {
    Undefined,
    NotFound(String),
    Invalid(String),
}

/// One page of `nodes` for `first`/`after` arguments.
fn page<'m>(
    typename: &'static str,
    nodes: Vec<Node<'m>>,
    args: &Map<String, Value>,
) -> Result<Node<'m>, FieldError> {
    let first = match args.get("first") {
        Some(Value::Number(n)) => usize::try_from(n.as_u64().unwrap_or(0)).unwrap_or(0),
        Some(Value::Null) | None => {
            return Err(FieldError::Invalid(format!(
                "You must provide a `first` or `last` value to properly paginate the `{typename}` connection."
            )));
        }
        Some(_) => 0,
    };
    if first > 100 {
        return Err(FieldError::Invalid(format!(
            "Requesting {first} records on the `{typename}` connection exceeds the `first` limit of 100 records."
        )));
    }
    let start = match args.get("after").and_then(Value::as_str) {
        Some(after) => decode_cursor(after).ok_or_else(|| {
            FieldError::Invalid(format!("`{after}` does not appear to be a valid cursor."))
        })?,
        None => 0,
    };
    let total = nodes.len() as u64;
    let page: Vec<Node<'m>> = nodes.into_iter().skip(start).take(first).collect();
    let has_next = (start + page.len()) < usize::try_from(total).unwrap_or(usize::MAX);
    Ok(Node::Connection {
        typename,
        nodes: page,
        edges_of: None,
        total,
        has_next,
        start,
        extra: Map::new(),
    })
}

/// A global node id in GitHub's style: a type prefix and an opaque (here base64) payload.
fn node_id(kind: &str, key: &str) -> String {
    let prefix = match kind {
        "Issue" => "I",
        "PullRequest" => "PR",
        _ => "R",
    };
    format!(
        "{prefix}_{}",
        base64_encode(format!("{kind}:{key}").as_bytes())
    )
}
