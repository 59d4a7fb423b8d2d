//! kiln's Hub client against the fake Hub of kiln-testkit, which checks every protocol step
//! (tokens, media types, hashes, parts) as the Hub does.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a panic is how a test fails"
)]
use std::time::Duration;

use kiln_hub::{CommitPlan, Content, Hub, HubError, Outcome, Upload};
use kiln_testkit::hub::FakeHub;

const TOKEN: &str = "hf_kiln_test_token";
const REPO: &str = "kiln-test/release";

fn hub(fake: &FakeHub, token: &str) -> Hub {
    Hub::new(&fake.url(), Some(token.to_string()))
        .unwrap()
        .with_backoff(Duration::from_millis(10))
}

fn uploads(dir: &std::path::Path, big: &[u8]) -> Vec<Upload> {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/test-00000-of-00001.parquet"), big).unwrap();
    vec![
        Upload {
            path_in_repo: "releases/2024-09/data/test-00000-of-00001.parquet".into(),
            content: Content::File(dir.join("data/test-00000-of-00001.parquet")),
        },
        Upload {
            path_in_repo: "README.md".into(),
            content: Content::Bytes(
                b"---\nconfigs:\n- config_name: default\n  data_files: x\n---\n# r\n".to_vec(),
            ),
        },
    ]
}

fn big_file() -> Vec<u8> {
    (0..2_500_000u32).map(|i| (i % 251) as u8).collect()
}

fn quiet(_: &str) {}

fn plan(summary: &'static str, description: &'static str) -> CommitPlan<'static> {
    CommitPlan {
        summary,
        description,
        ..CommitPlan::default()
    }
}

/// Pushes the two files of [`uploads`] to [`REPO`]'s `main` in a commit titled `summary`.
async fn push(
    client: &Hub,
    dir: &std::path::Path,
    big: &[u8],
    summary: &'static str,
    description: &'static str,
) -> Result<Outcome, HubError> {
    client
        .upload(
            REPO,
            "main",
            &plan(summary, description),
            uploads(dir, big),
            &quiet,
        )
        .await
}

#[tokio::test]
async fn a_push_goes_through_every_step_in_parts_and_lands_every_byte() {
    let fake = FakeHub::start(&[TOKEN]).unwrap();
    fake.set_part_size(1_000_000);
    let tmp = tempfile::tempdir().unwrap();
    let big = big_file();
    let client = hub(&fake, TOKEN);
    assert!(client.create_dataset_repo(REPO, false).await.unwrap());
    assert!(!client.create_dataset_repo(REPO, false).await.unwrap());
    let outcome = push(&client, tmp.path(), &big, "kiln release 2024-09", "one")
        .await
        .unwrap();
    assert!(outcome.commit.is_some());
    assert_eq!(
        outcome.sent,
        ["releases/2024-09/data/test-00000-of-00001.parquet"]
    );
    assert_eq!(outcome.inline, ["README.md"]);
    assert!(fake.problems().is_empty(), "{:#?}", fake.problems());
    let files = fake.files(REPO);
    assert_eq!(
        files["releases/2024-09/data/test-00000-of-00001.parquet"],
        big
    );
    assert!(files["README.md"].starts_with(b"---\nconfigs:"));
    // Three parts of at most 1 MB, then the completion, then verify.
    let parts = fake
        .requests()
        .iter()
        .filter(|r| r.method == "PUT" && r.path.contains("/part/"))
        .count();
    assert_eq!(parts, 3);
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.path.ends_with("/complete"))
    );
    // The token went to the Hub's API and never to the storage addresses.
    for request in fake.requests() {
        assert_eq!(
            request.authorized,
            !request.path.starts_with("/lfs-store/"),
            "{request:?}"
        );
    }
    // The same files again: nothing sent, no commit.
    let again = push(&client, tmp.path(), &big, "again", "").await.unwrap();
    assert_eq!(again.commit, None);
    assert_eq!(again.unchanged.len(), 2);
    assert_eq!(fake.commits(REPO).len(), 2);
    let listed = client
        .list_tree(REPO, "main", "releases", false)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].kind.as_str(), listed[0].path.as_str()),
        ("directory", "releases/2024-09")
    );
    assert!(
        client
            .list_tree(REPO, "main", "nothing", false)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_push_cut_off_before_its_commit_resumes_without_sending_again() {
    let fake = FakeHub::start(&[TOKEN]).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let big = big_file();
    let client = hub(&fake, TOKEN);
    client.create_dataset_repo(REPO, false).await.unwrap();
    // The commit endpoint fails more often than the client retries.
    fake.fail("/commit/", 503, 10);
    let error = push(&client, tmp.path(), &big, "first", "")
        .await
        .unwrap_err();
    assert!(
        matches!(error, HubError::Status { status: 503, .. }),
        "{error}"
    );
    assert_eq!(fake.commits(REPO).len(), 1);
    fake.clear_faults();
    let resumed = push(&client, tmp.path(), &big, "first", "").await.unwrap();
    assert!(resumed.commit.is_some());
    assert!(resumed.sent.is_empty(), "{resumed:?}");
    assert_eq!(resumed.already_stored.len(), 1);
    let puts = fake.requests().iter().filter(|r| r.method == "PUT").count();
    assert_eq!(puts, 1, "the object was sent once");
}

#[tokio::test]
async fn transient_failures_are_retried_and_refusals_are_explained_without_the_token() {
    let fake = FakeHub::start(&[TOKEN]).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let client = hub(&fake, TOKEN);
    client.create_dataset_repo(REPO, false).await.unwrap();
    fake.fail("/lfs-store/", 500, 2);
    fake.fail("/preupload/", 429, 1);
    let outcome = push(&client, tmp.path(), &big_file(), "retried", "")
        .await
        .unwrap();
    assert!(outcome.commit.is_some());
    assert!(fake.problems().is_empty(), "{:#?}", fake.problems());

    let intruder = hub(&fake, "hf_wrong_token_value");
    let refused = intruder
        .create_dataset_repo("kiln-test/other", false)
        .await
        .unwrap_err();
    let message = refused.to_string();
    assert!(message.contains("the Hub answered 401"), "{message}");
    assert!(!message.contains("hf_wrong_token_value"), "{message}");

    let card = "---\nconfigs:\n- data_files: x\n---\n";
    let invalid = client.validate_card(card).await.unwrap_err().to_string();
    assert!(invalid.contains("config_name"), "{invalid}");
    client
        .validate_card("---\nconfigs:\n- config_name: default\n  data_files: x\n---\n")
        .await
        .unwrap();
    assert!(Hub::new(&fake.url(), None).is_ok());
    let unreachable = Hub::new("http://127.0.0.1:9", Some(TOKEN.into()))
        .unwrap()
        .with_backoff(Duration::from_millis(1))
        .create_dataset_repo(REPO, false)
        .await
        .unwrap_err();
    assert!(
        matches!(unreachable, HubError::Transport { .. }),
        "{unreachable}"
    );
}

#[tokio::test]
async fn deletions_parents_and_paged_listings() {
    let fake = FakeHub::start(&[TOKEN]).unwrap();
    fake.set_page_size(2);
    let tmp = tempfile::tempdir().unwrap();
    let client = hub(&fake, TOKEN);
    client.create_dataset_repo(REPO, false).await.unwrap();
    let many: Vec<Upload> = (0..5)
        .map(|i| Upload {
            path_in_repo: format!("releases/2024-0{i}/README.md"),
            content: Content::Bytes(format!("card {i}\n").into_bytes()),
        })
        .collect();
    client
        .upload(REPO, "main", &plan("five", ""), many, &quiet)
        .await
        .unwrap();
    // Five directories over three pages, every page followed.
    let listed = client
        .list_tree(REPO, "main", "releases", false)
        .await
        .unwrap();
    assert_eq!(listed.len(), 5, "{listed:?}");
    assert!(
        fake.requests()
            .iter()
            .filter(|r| r.path.contains("/tree/"))
            .count()
            >= 3
    );
    // A stale file goes in the same commit as the new ones.
    let head = client.head_commit(REPO, "main").await.unwrap();
    let delete = CommitPlan {
        summary: "drop one",
        delete: vec!["releases/2024-00/README.md".into()],
        parent: Some(&head),
        ..CommitPlan::default()
    };
    let outcome = client
        .upload(REPO, "main", &delete, uploads(tmp.path(), b"x"), &quiet)
        .await
        .unwrap();
    assert!(outcome.commit.is_some());
    assert!(!fake.files(REPO).contains_key("releases/2024-00/README.md"));
    // A commit planned against an older head is refused, not stacked on the newer one.
    let stale = CommitPlan {
        summary: "late",
        parent: Some(&head),
        ..CommitPlan::default()
    };
    let refused = client
        .upload(REPO, "main", &stale, uploads(tmp.path(), b"y"), &quiet)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, HubError::Status { status: 412, .. }),
        "{refused}"
    );
    // A path outside the repository is refused before anything is sent.
    let outside = Upload {
        path_in_repo: "../etc/passwd".into(),
        content: Content::Bytes(b"x".to_vec()),
    };
    assert!(matches!(
        client
            .upload(REPO, "main", &plan("x", ""), vec![outside], &quiet)
            .await,
        Err(HubError::Protocol { .. })
    ));
}

/// Hostile or broken Hubs end in a bounded error that quotes at most a short prefix of what
/// they sent: a `next` link that loops, an answer past the size cap, an error answer of
/// 100 MB, a body that drips.
#[tokio::test]
async fn hostile_hubs_end_in_a_short_bounded_error() {
    use kiln_testkit::hub::Hostile;
    for (mode, expected) in [
        (Hostile::LoopingPages, "loop"),
        (Hostile::Huge(40 << 20), "larger than 32 MiB"),
        (Hostile::HugeError(100 << 20), "answered 400"),
        (Hostile::Drip(200), "did not arrive within 1 s"),
    ] {
        let fake = FakeHub::start(&[TOKEN]).unwrap();
        fake.turn_hostile(mode);
        let hub = Hub::new(&fake.url(), Some(TOKEN.to_string()))
            .unwrap()
            .with_backoff(Duration::from_millis(10))
            .with_body_deadline(Duration::from_secs(1));
        let started = std::time::Instant::now();
        let error = hub
            .list_tree(REPO, "main", "", true)
            .await
            .expect_err("a hostile answer must be an error");
        let message = error.to_string();
        assert!(message.contains(expected), "{mode:?}: {message}");
        assert!(
            message.len() < MESSAGE_CAP,
            "{mode:?}: a long error: {} bytes",
            message.len()
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{mode:?} took {:?}",
            started.elapsed()
        );
        if let Hostile::LoopingPages = mode {
            assert_eq!(
                fake.requests().len(),
                1,
                "the page is read once; its `next` link back to itself is refused unsent"
            );
        }
    }
}

/// The longest error message a hostile answer may cause: the quote of its answer and the words
/// around it.
const MESSAGE_CAP: usize = kiln_core::net::QUOTE_HEAD + kiln_core::net::QUOTE_TAIL + 256;

/// A listing whose every page names a new next page stops at its entry budget: the default
/// budget, 500,000 entries, is reached at page 500 of 1,000 entries, and page 501 ends it.
/// The fake ends its listing at page 1,000, so a client without the budget reads all of it.
#[tokio::test]
async fn endless_listings_stop_at_their_entry_budget() {
    use kiln_testkit::hub::Hostile;
    let fake = FakeHub::start(&[TOKEN]).unwrap();
    fake.turn_hostile(Hostile::EndlessPages {
        entries: 1000,
        path_bytes: 24,
        pages: 1000,
    });
    let error = hub(&fake, TOKEN)
        .list_tree(REPO, "main", "", true)
        .await
        .expect_err("a listing past its budget must be an error");
    let message = error.to_string();
    assert!(matches!(error, HubError::OverBudget { .. }), "{message}");
    assert!(
        message.contains("list the files of kiln-test/release")
            && message.contains("budget of 500000 entries")
            && message.contains("at page 501"),
        "{message}"
    );
    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        501,
        "one request per page, none after the budget"
    );
    let answered: usize = requests.iter().map(|r| r.body_bytes).sum();
    assert!(answered < 60 << 20, "{answered} bytes answered");
}

/// A listing whose pages are large stops at its byte budget, and reads no more than that
/// budget: the last page is cut where the budget ends, not read whole.
#[tokio::test]
async fn endless_listings_stop_at_their_byte_budget() {
    use kiln_hub::ListingBudget;
    use kiln_testkit::hub::Hostile;
    let fake = FakeHub::start(&[TOKEN]).unwrap();
    // Pages of about 1 MiB: 10 entries of 100 KiB paths.
    fake.turn_hostile(Hostile::EndlessPages {
        entries: 10,
        path_bytes: 100 << 10,
        pages: 1000,
    });
    let budget = ListingBudget {
        bytes: 4 << 20,
        ..ListingBudget::default()
    };
    let error = hub(&fake, TOKEN)
        .with_listing_budget(budget)
        .list_tree(REPO, "main", "", true)
        .await
        .expect_err("a listing past its budget must be an error");
    let message = error.to_string();
    assert!(
        message.contains("budget of 4 MiB of answers") && message.contains("at page 5"),
        "{message}"
    );
    assert_eq!(fake.requests().len(), 5, "four pages whole, the fifth cut");
}

/// An answer of 30 MB that lacks the field kiln reads is refused with a message that quotes
/// its head and tail only, for every call that reads a field.
#[tokio::test]
async fn huge_answers_without_their_fields_are_quoted_short() {
    use kiln_testkit::hub::Hostile;
    let fake = FakeHub::start(&[TOKEN]).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let client = hub(&fake, TOKEN);
    fake.turn_hostile(Hostile::HugeJson(30 << 20));
    let missing_sha = client
        .head_commit(REPO, "main")
        .await
        .expect_err("an answer without sha must be an error")
        .to_string();
    let missing_files = push(&client, tmp.path(), b"small", "x", "")
        .await
        .expect_err("a preupload answer without files must be an error")
        .to_string();
    for (message, expected) in [
        (&missing_sha, "no sha in {\"padding\":\"xxx"),
        (&missing_files, "no files list in {\"padding\":\"xxx"),
    ] {
        assert!(message.contains(expected), "{}", &message[..200]);
        assert!(message.contains("bytes left out"), "{}", &message[..200]);
        assert!(
            message.len() < MESSAGE_CAP,
            "a message of {} bytes: {}",
            message.len(),
            &message[..200]
        );
    }
}
