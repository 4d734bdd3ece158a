//! `radwasm policy replay` and `radwasm policy record-to-case`: decision
//! records (`crate::policy::records`) read back, re-decided with another
//! policy build, or turned into fixture cases.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use radwasm_policy_model::cases;
use serde::Serialize;
use serde_json::Value;

use super::policy_args::PolicyArgs;
use crate::policy::LoadedPolicy;
use crate::policy::records::{self, DecisionRecord, RecordedError, RecordedPlan};

/// `radwasm policy replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Decision-record files (JSON lines), or directories of them
    /// (`*.jsonl`, searched recursively, in name order).
    #[arg(required = true)]
    pub records: Vec<PathBuf>,
    /// Exit with code 1 if the policy answers any record differently.
    #[arg(long)]
    pub fail_on_diff: bool,
}

/// `radwasm policy record-to-case`.
#[derive(Debug, Args)]
pub struct RecordToCaseArgs {
    /// A decision-record file, optionally followed by `:LINE` (1-based);
    /// without a line, the file's last record.
    pub record: String,
    /// Write the case to this file instead of standard output. No short
    /// form: `-o` is `--observation` in the `policy` commands.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// How the case compares plans: `exact` (the whole action list, in
    /// order) or `partial` (edit the actions down to those that matter).
    #[arg(long = "match", value_name = "MODE", value_enum, default_value_t = MatchArg::Exact)]
    pub match_mode: MatchArg,
}

/// `--match` of `record-to-case`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MatchArg {
    Exact,
    Partial,
}

/// One line of a record file.
struct Line {
    number: usize,
    parsed: Result<DecisionRecord, String>,
}

/// The record files named on the command line, directories expanded
/// (recursively, `*.jsonl`, sorted by path).
fn record_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        let metadata =
            std::fs::metadata(path).with_context(|| format!("{}: cannot read", path.display()))?;
        if metadata.is_dir() {
            let mut found = Vec::new();
            collect(path, &mut found)?;
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

fn collect(directory: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let entries = std::fs::read_dir(directory)
        .with_context(|| format!("{}: cannot list", directory.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("{}: cannot list", directory.display()))?;
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files)?;
        } else if path
            .extension()
            .is_some_and(|ext| ext == records::FILE_EXTENSION)
        {
            files.push(path);
        }
    }
    Ok(())
}

/// Every non-blank line of a record file, parsed. A line that is not a
/// record (cut short, not UTF-8, not JSON) is kept with the problem; an
/// unreadable file is an error.
fn read_lines(path: &Path, mut each: impl FnMut(Line)) -> anyhow::Result<()> {
    let file =
        std::fs::File::open(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let mut buffer = Vec::new();
    let mut number = 0;
    loop {
        buffer.clear();
        let read = reader
            .read_until(b'\n', &mut buffer)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        if read == 0 {
            return Ok(());
        }
        number += 1;
        let parsed = match std::str::from_utf8(&buffer) {
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => DecisionRecord::from_json_line(text.trim_end()),
            Err(_) => Err("not UTF-8 text".to_string()),
        };
        each(Line { number, parsed });
    }
}

/// What a policy answered: actions, or why there were none.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Plan(Vec<Value>),
    Error(RecordedError),
}

impl Answer {
    fn of_record(record: &DecisionRecord) -> Self {
        match record.answer() {
            Ok(actions) => Answer::Plan(actions.to_vec()),
            Err(error) => Answer::Error(error.clone()),
        }
    }

    fn decide(policy: &LoadedPolicy, record: &DecisionRecord) -> Self {
        match policy.decide(&record.observation) {
            Ok(decision) => Answer::Plan(decision.plan.actions_json()),
            Err(error) => Answer::Error(RecordedError::from(&error)),
        }
    }

    /// The same answer: equal action lists, or the same kind of failure
    /// (for a policy error, the same code and message).
    fn agrees_with(&self, other: &Answer) -> bool {
        match (self, other) {
            (Answer::Plan(a), Answer::Plan(b)) => a == b,
            (Answer::Error(a), Answer::Error(b)) => {
                a.reason == b.reason
                    && (!a.is_policy_error() || (a.code == b.code && a.message == b.message))
            }
            _ => false,
        }
    }

    /// `addFinalizer, setStatus, requeueAfter`, or the error.
    fn summary(&self) -> String {
        match self {
            Answer::Plan(actions) if actions.is_empty() => "(no actions)".to_string(),
            Answer::Plan(actions) => actions
                .iter()
                .map(records::action_kind)
                .collect::<Vec<_>>()
                .join(", "),
            Answer::Error(error) => format!("error {}", shorten(&error.summary(), 160)),
        }
    }
}

/// Label under which disagreements involving a failed decision are counted.
const ERROR_KIND: &str = "(error)";

/// The action kinds whose actions differ between two answers (in the order
/// they first appear), and the first differing action when the kinds are
/// the same.
fn differing_kinds(recorded: &Answer, replayed: &Answer) -> Vec<String> {
    let (Answer::Plan(recorded), Answer::Plan(replayed)) = (recorded, replayed) else {
        return vec![ERROR_KIND.to_string()];
    };
    let mut kinds: Vec<String> = Vec::new();
    for action in recorded.iter().chain(replayed) {
        let kind = records::action_kind(action);
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds.retain(|kind| {
        let of_kind = |actions: &[Value]| -> Vec<Value> {
            actions
                .iter()
                .filter(|action| records::action_kind(action) == *kind)
                .cloned()
                .collect()
        };
        of_kind(recorded) != of_kind(replayed)
    });
    kinds
}

fn first_difference(recorded: &[Value], replayed: &[Value]) -> Option<(usize, String, String)> {
    let index = recorded.iter().zip(replayed).position(|(a, b)| a != b)?;
    Some((
        index,
        shorten(&recorded[index].to_string(), 200),
        shorten(&replayed[index].to_string(), 200),
    ))
}

fn shorten(text: &str, at_most: usize) -> String {
    if text.chars().count() <= at_most {
        return text.to_string();
    }
    let mut short: String = text.chars().take(at_most.saturating_sub(1)).collect();
    short.push('…');
    short
}

/// Tallies of one replay.
#[derive(Default)]
struct Tally {
    agreed: usize,
    disagreed: usize,
    unreadable: usize,
    /// Disagreements of records the very same policy build made.
    same_build: usize,
    by_kind: BTreeMap<String, usize>,
}

impl Tally {
    /// Count a record the policy answered differently, by the action kinds
    /// it differs in.
    fn count_disagreement(&mut self, same_build: bool, kinds: &[String]) {
        self.disagreed += 1;
        if same_build {
            self.same_build += 1;
        }
        for kind in kinds {
            *self.by_kind.entry(kind.clone()).or_default() += 1;
        }
    }

    /// Print the tallies of a replay of `files` record files.
    fn print(&self, files: usize) {
        let total = self.agreed + self.disagreed;
        let percent = 100.0 * self.agreed as f64 / total as f64;
        println!(
            "{total} records from {files} file{}: {} agree, {} disagree ({percent:.1} % agree); {} unreadable lines",
            if files == 1 { "" } else { "s" },
            self.agreed,
            self.disagreed,
            self.unreadable
        );
        if !self.by_kind.is_empty() {
            println!("records disagreeing, by action kind:");
            let width = self.by_kind.keys().map(String::len).max().unwrap_or(0);
            for (kind, count) in &self.by_kind {
                println!("  {kind:width$}  {count}");
            }
        }
        if self.same_build > 0 {
            println!(
                "{} disagreeing records were decided by this same policy build",
                self.same_build
            );
        }
    }
}

pub fn replay(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let files = record_files(&args.records)?;
    if files.is_empty() {
        anyhow::bail!(
            "no record files (*.{}) found in {}",
            records::FILE_EXTENSION,
            display_paths(&args.records)
        );
    }
    let policy = args.policy.load()?;
    println!(
        "replaying with {} (sha256 {}), fuel {}, memory {} MiB",
        policy.display_name(),
        short_digest(policy.digest()),
        args.policy.fuel,
        args.policy.memory_mib
    );
    let mut tally = Tally::default();
    for file in &files {
        let name = file.display().to_string();
        read_lines(file, |line| {
            let record = match line.parsed {
                Ok(record) => record,
                Err(problem) => {
                    tally.unreadable += 1;
                    println!("BAD  {name}:{}: {}", line.number, shorten(&problem, 300));
                    return;
                }
            };
            let recorded = Answer::of_record(&record);
            let replayed = Answer::decide(&policy, &record);
            if recorded.agrees_with(&replayed) {
                tally.agreed += 1;
                return;
            }
            let same_build = record.policy.digest == policy.digest();
            let kinds = differing_kinds(&recorded, &replayed);
            tally.count_disagreement(same_build, &kinds);
            let place = format!("{name}:{}", line.number);
            let report = disagreement(&place, &record, &recorded, &replayed, &kinds, same_build);
            println!("{report}");
        })?;
    }
    if tally.agreed + tally.disagreed == 0 {
        anyhow::bail!(
            "no decision record could be read from {} ({} unreadable lines)",
            display_paths(&args.records),
            tally.unreadable
        );
    }
    tally.print(files.len());
    Ok(if args.fail_on_diff && tally.disagreed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// What `replay` says of a record (at `place`, `FILE:LINE`) the policy
/// answered differently: the recorded and the replayed answer, the action
/// `kinds` they differ in, the first action that differs, and whether the
/// record was made by this very policy build (`same_build`).
fn disagreement(
    place: &str,
    record: &DecisionRecord,
    recorded: &Answer,
    replayed: &Answer,
    kinds: &[String],
    same_build: bool,
) -> String {
    let mut report = format!(
        "DIFF {place} {} {} (decided by {}, {}, at {})",
        record.kind.as_str(),
        record.object,
        record.policy.display_name(),
        record.role.as_str(),
        record
            .at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    );
    let _ = write!(report, "\n     recorded: {}", recorded.summary());
    let _ = write!(report, "\n     replayed: {}", replayed.summary());
    let _ = write!(report, "\n     differs in: {}", kinds.join(", "));
    if let (Answer::Plan(a), Answer::Plan(b)) = (recorded, replayed)
        && let Some((index, was, now)) = first_difference(a, b)
    {
        let _ = write!(
            report,
            "\n     first difference, action {index}:\n       recorded {was}\n       replayed {now}"
        );
    }
    if same_build {
        report.push_str(
            "\n     note: recorded by this very policy build; the decision did not reproduce",
        );
    }
    report
}

fn short_digest(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

fn display_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|path| path.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `FILE` or `FILE:LINE`: a file name that exists as written wins, so a
/// name with a colon still works.
fn parse_location(text: &str) -> anyhow::Result<(PathBuf, Option<usize>)> {
    if Path::new(text).exists() {
        return Ok((PathBuf::from(text), None));
    }
    if let Some((file, line)) = text.rsplit_once(':')
        && let Ok(line) = line.parse::<usize>()
    {
        anyhow::ensure!(line > 0, "{text}: line numbers start at 1");
        return Ok((PathBuf::from(file), Some(line)));
    }
    Ok((PathBuf::from(text), None))
}

/// The fixture case a record becomes, fields in the order cases are written.
#[derive(Serialize)]
struct CaseFile {
    description: String,
    observation: Value,
    expect: Value,
}

pub fn record_to_case(args: &RecordToCaseArgs) -> anyhow::Result<ExitCode> {
    let (file, wanted) = parse_location(&args.record)?;
    let mut chosen: Option<Line> = None;
    read_lines(&file, |line| match wanted {
        Some(number) if line.number == number => chosen = Some(line),
        Some(_) => {}
        None => chosen = Some(line),
    })?;
    let name = file.display();
    let Some(line) = chosen else {
        match wanted {
            Some(number) => anyhow::bail!("{name}:{number}: no record on that line"),
            None => anyhow::bail!("{name}: no records in the file"),
        }
    };
    let record = line
        .parsed
        .map_err(|problem| anyhow::anyhow!("{name}:{}: {problem}", line.number))?;
    let case =
        case_of(&record, args.match_mode).with_context(|| format!("{name}:{}", line.number))?;
    let mut text = serde_json::to_string_pretty(&case)?;
    text.push('\n');
    // What `policy test` will read must load as a case.
    serde_json::from_str::<cases::Case>(&text)
        .context("the case written does not load as a fixture case (a bug)")?;
    match &args.output {
        Some(output) => {
            std::fs::write(output, &text)
                .with_context(|| format!("{}: cannot write", output.display()))?;
            eprintln!(
                "wrote {} from {name}:{} ({} {})",
                output.display(),
                line.number,
                record.kind.as_str(),
                record.object
            );
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

fn case_of(record: &DecisionRecord, match_mode: MatchArg) -> anyhow::Result<CaseFile> {
    let expect = match record.answer() {
        Ok(actions) => serde_json::json!({
            "match": match match_mode {
                MatchArg::Exact => "exact",
                MatchArg::Partial => "partial",
            },
            "actions": actions,
        }),
        Err(error) if error.is_policy_error() => serde_json::json!({
            "error": {
                "code": error.code.clone().unwrap_or_default(),
                "messageContains": error.message,
            }
        }),
        Err(error) => anyhow::bail!(
            "the recorded decision failed in the sandbox ({}); a fixture case can expect only \
             a plan or a policy error. Save the record's `observation` to a file and run it \
             with `radwasm policy run`",
            shorten(&error.summary(), 300)
        ),
    };
    let mut observation = serde_json::to_value(&record.observation)?;
    inline_json_text(&mut observation);
    Ok(CaseFile {
        description: format!(
            "{} {}: what {} (sha256 {}, {}) decided at {}",
            record.kind.as_str(),
            record.object,
            record.policy.display_name(),
            short_digest(&record.policy.digest),
            record.role.as_str(),
            record
                .at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ),
        observation,
        expect,
    })
}

/// Write the JSON-text fields of an observation (spec template, parameters,
/// provider config) inline where that reads back as the very same text, so
/// the case is readable and the policy still sees identical input.
fn inline_json_text(observation: &mut Value) {
    let fields: [(&str, &[&str]); 2] = [
        (
            "/deploymentTemplate/spec",
            &["template", "parameters", "providerConfig"],
        ),
        ("/deploymentResource/owner", &["providerConfig"]),
    ];
    for (parent, names) in fields {
        let Some(Value::Object(object)) = observation.pointer_mut(parent) else {
            continue;
        };
        for name in names {
            let Some(Value::String(text)) = object.get(*name) else {
                continue;
            };
            if let Ok(value @ (Value::Object(_) | Value::Array(_))) =
                serde_json::from_str::<Value>(text)
                && serde_json::to_string(&value).is_ok_and(|again| again == *text)
            {
                object.insert((*name).to_string(), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differing_kinds_names_each_kind_whose_actions_changed() {
        let recorded = Answer::Plan(vec![
            json!("addFinalizer"),
            json!({"setStatus": {"phase": "Updating"}}),
            json!({"requeueAfter": 200}),
        ]);
        let replayed = Answer::Plan(vec![
            json!("addFinalizer"),
            json!({"setStatus": {"phase": "Failed"}}),
            json!({"emitEvent": {"type": "Warning", "reason": "X", "message": "m"}}),
            json!({"requeueAfter": 200}),
        ]);
        assert_eq!(
            differing_kinds(&recorded, &replayed),
            ["setStatus", "emitEvent"]
        );
        let refused = Answer::Error(RecordedError {
            reason: "PolicyError".into(),
            code: Some("Invalid".into()),
            message: "m".into(),
        });
        assert_eq!(differing_kinds(&recorded, &refused), [ERROR_KIND]);
        assert!(!recorded.agrees_with(&replayed));
        assert!(refused.agrees_with(&refused.clone()));
    }

    #[test]
    fn sandbox_failures_agree_on_the_reason_policy_errors_on_code_and_message() {
        let fuel = |message: &str| {
            Answer::Error(RecordedError {
                reason: "OutOfFuel".into(),
                code: None,
                message: message.into(),
            })
        };
        assert!(fuel("policy a used its whole budget").agrees_with(&fuel("policy b ...")));
        let refused = |message: &str| {
            Answer::Error(RecordedError {
                reason: "PolicyError".into(),
                code: Some("Invalid".into()),
                message: message.into(),
            })
        };
        assert!(!refused("one").agrees_with(&refused("two")));
    }

    #[test]
    fn json_text_is_inlined_only_when_it_reads_back_identically() {
        let mut observation = json!({"deploymentTemplate": {"spec": {
            "template": "{\"a\":1,\"b\":[2]}",
            "parameters": "{ \"spaced\": true }",
            "providerConfig": "not json"
        }}});
        inline_json_text(&mut observation);
        let spec = &observation["deploymentTemplate"]["spec"];
        assert_eq!(spec["template"], json!({"a": 1, "b": [2]}));
        assert_eq!(spec["parameters"], "{ \"spaced\": true }");
        assert_eq!(spec["providerConfig"], "not json");
    }

    #[test]
    fn locations_take_an_optional_line() {
        assert_eq!(
            parse_location("records.jsonl:12").expect("location"),
            (PathBuf::from("records.jsonl"), Some(12))
        );
        assert_eq!(
            parse_location("records.jsonl").expect("location"),
            (PathBuf::from("records.jsonl"), None)
        );
        assert!(parse_location("records.jsonl:0").is_err());
    }
}
