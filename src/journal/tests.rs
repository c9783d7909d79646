use super::report::Report;
use super::*;
use crate::api::PropagationPolicy;

fn entry(source: Source, action: Action, uid: &str) -> Entry {
    Entry {
        time: "2026-11-26T00:00:00.000000Z".into(),
        source,
        action,
        object: ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            resource: "pods".into(),
            namespace: "ns".into(),
            name: format!("pod-{uid}"),
            uid: uid.into(),
        },
        policy: (action == Action::Delete).then_some(PropagationPolicy::Background),
        finalizer: None,
        owners: Vec::new(),
        refs: Vec::new(),
        evidence: Evidence::Graph,
        reason: "test".into(),
        preconditions: None,
        patch: None,
        answer: None,
    }
}

/// A DELETE of the Pod `ns/pod-{uid}`, sent and answered.
fn record(uid: &str) -> Record {
    use crate::graph::{Identity, Name, Sym, TypeMeta, Uid};
    let identity = Identity::new(
        TypeMeta::new(Sym::new("v1"), Sym::new("Pod")),
        Name::new(&format!("pod-{uid}")),
        Uid::parse(uid),
        Sym::new("ns"),
    );
    let mut record = Record::new(Source::Sent, Action::Delete, &identity, Evidence::Graph, "test");
    record.resource = Sym::new("pods");
    record.policy = Some(PropagationPolicy::Background);
    record.answer = Some(Answer::ok(200));
    record
}

fn uids(entries: &[Entry]) -> Vec<String> {
    entries.iter().map(|e| e.object.uid.clone()).collect()
}

fn file_journal(dir: &std::path::Path, max_bytes: u64, max_files: usize) -> (Journal, std::path::PathBuf) {
    let path = dir.join("journal.jsonl");
    let config = JournalConfig {
        file: Some(FileConfig {
            path: path.clone(),
            max_bytes,
            max_files,
        }),
        ..JournalConfig::default()
    };
    (Journal::open(config).expect("journal opens"), path)
}

#[test]
fn every_recorded_line_should_be_read_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, path) = file_journal(dir.path(), u64::MAX, 3);
    for i in 0..100 {
        journal.record(record(&i.to_string()));
    }
    journal.flush();
    let lines = read(&path).unwrap();
    let expected: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    assert_eq!(uids(&lines), expected);
    let first = &lines[0];
    assert_eq!(
        (first.action, first.object.resource.as_str(), first.object.name.as_str()),
        (Action::Delete, "pods", "pod-0")
    );
    assert_eq!(first.answer, Some(Answer::ok(200)));
    // RFC 3339, UTC, microseconds: 2026-11-26T06:00:15.213889Z
    let time = first.time.as_bytes();
    assert_eq!(
        (time.len(), time[10], time[19], time[26]),
        (27, b'T', b'.', b'Z'),
        "{}",
        first.time
    );
    let latest: Vec<Entry> = journal.latest(usize::MAX).iter().map(|e| (**e).clone()).collect();
    assert_eq!(latest, lines, "the file and the latest lines agree");
}

#[test]
fn a_full_file_should_rotate_between_whole_lines_and_keep_max_files() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, path) = file_journal(dir.path(), 2_000, 2);
    for i in 0..200 {
        journal.record(record(&i.to_string()));
    }
    journal.flush();
    let files = [path.clone(), numbered(&path, 1), numbered(&path, 2)];
    let mut uids = Vec::new();
    for file in files.iter().rev() {
        let len = std::fs::metadata(file).expect("kept").len();
        assert!(len <= 2_000, "{} holds {len} bytes", file.display());
        uids.extend(self::uids(&read(file).expect("whole lines")));
    }
    assert!(!numbered(&path, 3).exists(), "only two old files are kept");
    let newest: Vec<String> = (200 - uids.len()..200).map(|i| i.to_string()).collect();
    assert_eq!(uids, newest, "the kept files hold the newest lines, in order");
}

#[test]
fn the_latest_lines_should_stay_in_memory_without_a_file() {
    let journal = Journal::in_memory();
    for i in 0..LATEST + 5 {
        journal.record(record(&i.to_string()));
    }
    journal.flush();
    let latest = journal.latest(3);
    let uids: Vec<&str> = latest.iter().map(|e| e.object.uid.as_str()).collect();
    let last = LATEST + 4;
    assert_eq!(uids, [(last - 2).to_string(), (last - 1).to_string(), last.to_string()]);
    assert_eq!(journal.latest(usize::MAX).len(), LATEST);
    assert!(!journal.is_dry_run());
    assert!(Journal::disabled().latest(10).is_empty());
}

#[test]
fn a_last_line_torn_by_a_killed_writer_should_be_skipped_and_a_whole_one_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let first = serde_json::to_string(&entry(Source::Sent, Action::Delete, "1")).unwrap();
    let second = serde_json::to_string(&entry(Source::Sent, Action::Delete, "2")).unwrap();
    std::fs::write(&path, format!("{first}\n{}", &second[..second.len() / 2])).unwrap();
    assert_eq!(uids(&read(&path).unwrap()), ["1"]);
    std::fs::write(&path, format!("{first}\n{second}")).unwrap();
    assert_eq!(
        uids(&read(&path).unwrap()),
        ["1", "2"],
        "a last line without its newline"
    );
}

#[test]
fn a_line_that_is_not_an_entry_should_be_named_by_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let good = serde_json::to_string(&entry(Source::Sent, Action::Delete, "1")).unwrap();
    std::fs::write(&path, format!("{good}\n{{\"time\": 3}}\n")).unwrap();
    let error = read(&path).unwrap_err();
    assert!(error.contains("j.jsonl:2: not a journal entry"), "{error}");
}

#[test]
fn the_report_should_sort_keys_into_agreed_missed_and_shadow_only() {
    let mut orphan = entry(Source::DryRun, Action::Orphan, "b");
    orphan.refs = vec!["owner".into()];
    let mut observed_orphan = orphan.clone();
    observed_orphan.source = Source::Observed;
    let mut user_deletion = entry(Source::Observed, Action::Delete, "d");
    user_deletion.owners = vec![OwnerSeen {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "rs".into(),
        uid: "owner".into(),
        state: OwnerState::Solid,
        seen: Seen::Graph,
    }];
    let entries = [
        entry(Source::DryRun, Action::Delete, "a"),
        entry(Source::DryRun, Action::Delete, "a"), // decided twice: one key
        entry(Source::Observed, Action::Delete, "a"),
        orphan,
        observed_orphan,
        entry(Source::DryRun, Action::Delete, "c"),
        user_deletion,
        entry(Source::Observed, Action::Delete, "e"),
    ];
    let report = Report::compare(&entries);
    let uids = |list: &[Entry]| list.iter().map(|e| e.object.uid.clone()).collect::<Vec<_>>();
    assert_eq!(uids(&report.agreed), ["a", "b"]);
    assert_eq!(uids(&report.done_only_by_shadow), ["c"]);
    assert_eq!(
        uids(&report.missed_by_shadow),
        ["e"],
        "the user's deletion is not counted"
    );
    assert!(!report.agrees());
    let text = report.to_text();
    assert!(
        text.starts_with("2 agreed, 1 missed by the shadow, 1 done only by the shadow"),
        "{text}"
    );
    assert!(text.contains("delete (Background) Pod ns/pod-c (c): test"), "{text}");
}

#[test]
fn a_policy_difference_should_be_a_difference() {
    let decided = entry(Source::DryRun, Action::Delete, "a");
    let mut observed = entry(Source::Observed, Action::Delete, "a");
    observed.policy = Some(PropagationPolicy::Foreground);
    let report = Report::compare(&[decided, observed]);
    assert_eq!(report.done_only_by_shadow.len(), 1);
    assert_eq!(report.missed_by_shadow.len(), 1);
}
