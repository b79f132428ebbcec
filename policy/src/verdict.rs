//! Verdicts, findings and classifications: the data the policy produces for one action.

use serde::Serialize;
use std::fmt;
use std::path::PathBuf;

/// The colour of an action (DESIGN.md §2, seed `000_cd5b01d9f66b8535.txt`).
///
/// Ordered from the most permissive to the strictest, so that a compound action
/// is the [`Ord::max`] of its parts: `Green < Yellow < Red < Blocked`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Passes by itself: a closed, compiled-in list of read-only commands, and edit-tool
    /// writes inside the worktree.
    Green,
    /// Waits for the person; may be remembered ("always") for the session.
    Yellow,
    /// Waits for the person; can never be remembered.
    Red,
    /// Not even offered: refused at once with the reason.
    Blocked,
}

impl Verdict {
    /// The lower-case name used in JSON and on the terminal (`green`, `yellow`, `red`, `blocked`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Green => "green",
            Verdict::Yellow => "yellow",
            Verdict::Red => "red",
            Verdict::Blocked => "blocked",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Verdict {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "green" => Ok(Verdict::Green),
            "yellow" => Ok(Verdict::Yellow),
            "red" => Ok(Verdict::Red),
            "blocked" => Ok(Verdict::Blocked),
            other => Err(format!(
                "unknown verdict `{other}` (expected green, yellow, red or blocked)"
            )),
        }
    }
}

/// Findings kept per rule id and colour; the verdict still counts every one.
const MAX_FINDINGS_PER_RULE: usize = 4;

/// One rule that fired: its stable id (e.g. `rm.recursive-force`, `git.push.protected`),
/// the colour it imposes and a human reason naming what it saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Colour this rule imposes on the action.
    pub verdict: Verdict,
    /// Stable rule id, dotted (`family.rule`): one of [`crate::rules::ALL`] (or of its
    /// families `wrapper.<program>`, `policy.<id>`), listed in `docs/rules.md`.
    pub rule: String,
    /// Human reason, lower-case, no trailing period; shown to the person and the agent.
    pub reason: String,
}

impl Finding {
    /// A finding with the given colour, rule id and reason.
    pub fn new(verdict: Verdict, rule: impl Into<String>, reason: impl Into<String>) -> Self {
        Finding {
            verdict,
            rule: rule.into(),
            reason: reason.into(),
        }
    }
}

/// Syntax the analysed line used, for the execution modes of DESIGN.md §4.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Shape {
    /// More than one simple command, or operators, redirections, substitutions, here-documents:
    /// refused in `safe` mode.
    pub compound: bool,
    /// A construct the analyser cannot see through (`eval` of a non-literal, `bash -c "$x"`,
    /// `source` of a generated file): refused in `auto` mode.
    pub opaque: bool,
    /// The line reached its paths through text that can change between the ask and the run
    /// (a git alias in a configuration file, a sourced or run script): a rule of
    /// [`crate::rules::INDIRECT`] fired. Serialized only when set.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub indirect: bool,
}

/// The policy's full answer for one action.
///
/// `verdict` is the maximum of the findings' verdicts, and at least `Green`; `findings` holds
/// every rule that fired, in the order they were found (no duplicates of the same rule and
/// reason); `paths` the absolute paths the action names (lexically resolved, deduplicated, in
/// order of appearance); `writes` those of them a command writes or creates, `changes` those
/// it deletes, renames or links and `metadata` those whose mode or owner it changes (subsets
/// of `paths`); `hosts` the network destinations it names (`host:port`, `[v6]:port`: a URL's explicit
/// port or its scheme's default; a bare host only where no port is known, which an approval
/// covers no connection to).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Classification {
    /// Worst colour of all parts.
    pub verdict: Verdict,
    /// Rules that fired.
    pub findings: Vec<Finding>,
    /// Absolute paths the action names.
    pub paths: Vec<PathBuf>,
    /// Those of `paths` that a command of the action writes or creates (`> f`, `cp a f`,
    /// `tee f`); paths it deletes, renames or links are in `changes`, and those whose
    /// metadata it changes and the operands of programs nobody listed in `paths` only.
    pub writes: Vec<PathBuf>,
    /// Those of `paths` that a command of the action deletes, renames (either name) or links,
    /// without writing what they hold (`rm f`, `mv a b`, `ln -s t l`): what an approval of the
    /// line lets its command do to those names. A path whose metadata only changes (`chmod`)
    /// is not one. Not serialized: reports show them through their findings ("changes outside
    /// the worktree").
    #[serde(skip)]
    pub changes: Vec<PathBuf>,
    /// Those of `paths` whose metadata (mode, owner, group, attributes) a command of the
    /// action changes: the operands of `chmod`, `chown`, `chgrp`, `chattr` and `setfacl`, and
    /// what `mkdir -m` and `install -m` make (also in `writes`). What an approval of the line
    /// lets its command change on them (mode, owner, times); writing, removing or renaming them
    /// only as `writes` and `changes` say. Not serialized, as `changes`.
    #[serde(skip)]
    pub metadata: Vec<PathBuf>,
    /// Those of `metadata` that a command changes recursively (`chmod -R`): the path and
    /// everything beneath it. The others are that path only.
    #[serde(skip)]
    pub metadata_trees: Vec<PathBuf>,
    /// Those of `writes` that a program the policy knows saves as programs save files, by
    /// that program's own rule: through a temporary copy beside the file renamed over it
    /// (`sed -i` with a script that runs nothing), or by removing the file and making it anew
    /// (`install`, `cp`). An allowlist: nothing else is in it. The supervisor lets an
    /// approved line's command save them that way without asking again, when the line is that
    /// one command and runs no code the policy does not analyse.
    #[serde(skip)]
    pub saved: Vec<PathBuf>,
    /// Those of `writes` that a command makes as directories (`mkdir DIR`, `install -d DIR`):
    /// what an approval lets it make there is a directory, never a file. Not serialized, as
    /// `changes`.
    #[serde(skip)]
    pub dirs_made: Vec<PathBuf>,
    /// Those of `dirs_made` whose missing parent directories the command makes too
    /// (`mkdir -p`, `install -d`).
    #[serde(skip)]
    pub parents_made: Vec<PathBuf>,
    /// Those of `writes` that a command may make as a directory tree or as a file, which
    /// cannot be known before it runs (a recursive copy's destination: `cp -r`, `rsync -a`;
    /// a directory source makes a directory, a file a file). Not serialized, as `changes`.
    #[serde(skip)]
    pub trees_made: Vec<PathBuf>,
    /// Network destinations the action names, each with the port it connects to when known.
    pub hosts: Vec<String>,
    /// Syntax features the line used.
    pub shape: Shape,
    /// For a command line whose every part but one is neutral shell housekeeping (an agent's
    /// wrapper: option builtins, traps, `eval` of literal words, scratch-directory redirections,
    /// sourced definitions; DESIGN.md §2a), that one part as written: the text the session's
    /// "always" memory keys on, so an answer given for the bare command matches the wrapped
    /// call. `None` for any other line, and whenever a sourced definition shadowed a command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inner_command: Option<String>,
    /// The pushes a `git push` of the action would make, as the git inspector resolved them
    /// (one entry per push URL), for the supervisor's relay of pushes to local repositories
    /// (`docs/sandbox.md`). Not serialized: reports show pushes through their findings.
    #[serde(skip)]
    pub pushes: Vec<PushReport>,
}

/// One push URL a `git push` would send to, and the remote refs it would write there, as the
/// git inspector resolved them (git-push(1); `tyba_git_guard::push`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushReport {
    /// The push URL (after `pushurl`/`insteadOf`), credentials included: never shown as is.
    pub url: String,
    /// The path the URL names when it is a local one (`file://…`, or no `:` before the first
    /// `/`), absolute and lexical; `None` for a network URL.
    pub local_path: Option<PathBuf>,
    /// The remote refs it would write, in resolution order.
    pub refs: Vec<PushRef>,
}

/// One remote ref a push would write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushRef {
    /// Full ref name (`refs/heads/feature-x`), or a name git would reject.
    pub dst: String,
    /// The push deletes it.
    pub delete: bool,
    /// The push may rewrite it (`+`, `--force`, `--mirror`).
    pub force: bool,
}

impl Classification {
    /// An empty green classification, to accumulate findings into.
    pub fn green() -> Self {
        Classification {
            verdict: Verdict::Green,
            findings: Vec::new(),
            paths: Vec::new(),
            writes: Vec::new(),
            changes: Vec::new(),
            metadata: Vec::new(),
            metadata_trees: Vec::new(),
            saved: Vec::new(),
            dirs_made: Vec::new(),
            parents_made: Vec::new(),
            trees_made: Vec::new(),
            hosts: Vec::new(),
            shape: Shape::default(),
            inner_command: None,
            pushes: Vec::new(),
        }
    }

    /// Adds a finding and raises the verdict to at least its colour.
    pub fn add(&mut self, finding: Finding) {
        self.verdict = self.verdict.max(finding.verdict);
        if crate::rules::INDIRECT.iter().any(|r| r.id == finding.rule) {
            self.shape.indirect = true;
        }
        // Keep a few examples per rule: a glob over a thousand files needs no thousand reasons.
        let same_rule = self
            .findings
            .iter()
            .filter(|f| f.rule == finding.rule && f.verdict == finding.verdict)
            .count();
        if same_rule < MAX_FINDINGS_PER_RULE
            && !self
                .findings
                .iter()
                .any(|f| f.rule == finding.rule && f.reason == finding.reason)
        {
            self.findings.push(finding);
        }
    }

    /// Whether an approved run of this action may be given the paths it names on top of
    /// the agent's ruleset: not when the line is opaque or [`Shape::indirect`] (its paths
    /// may change before it runs).
    pub fn grants_allowed(&self) -> bool {
        !(self.shape.opaque || self.shape.indirect)
    }

    /// Whether an approval of the line may let its command save `path` the way its program
    /// does (`saved`): the line is that one command (not a list or pipeline, where another
    /// program could use the copies) and runs no code the policy does not analyse.
    pub fn saves(&self, path: &std::path::Path) -> bool {
        self.saved.iter().any(|p| p == path) && !self.shape.compound && !self.runs_unanalysed_code()
    }

    /// Whether the action runs code the policy does not analyse: an interpreter's code or
    /// script (`interp.code`: `python3 x.py`, `perl -e`, a sed script that runs commands or
    /// comes from a file), or code that cannot be known (opaque). What such code does with an
    /// approval's grants is not on the line: the supervisor gives it the grants the line
    /// names and nothing it would infer from the program (a file saved through a temporary
    /// copy beside it).
    pub fn runs_unanalysed_code(&self) -> bool {
        self.shape.opaque
            || self
                .findings
                .iter()
                .any(|f| f.rule == crate::rules::INTERP_CODE.id)
    }

    /// Rule ids of all findings, in order.
    pub fn rules(&self) -> Vec<&str> {
        self.findings.iter().map(|f| f.rule.as_str()).collect()
    }

    /// Reasons of the findings that set the verdict (the strictest ones), in order.
    pub fn decisive_reasons(&self) -> Vec<&str> {
        self.findings
            .iter()
            .filter(|f| f.verdict == self.verdict)
            .map(|f| f.reason.as_str())
            .collect()
    }

    /// Merges another classification into this one (worst verdict wins).
    pub fn merge(&mut self, other: Classification) {
        for f in other.findings {
            self.add(f);
        }
        self.verdict = self.verdict.max(other.verdict);
        push_new(&mut self.paths, other.paths);
        push_new(&mut self.writes, other.writes);
        push_new(&mut self.changes, other.changes);
        push_new(&mut self.metadata, other.metadata);
        push_new(&mut self.metadata_trees, other.metadata_trees);
        push_new(&mut self.saved, other.saved);
        push_new(&mut self.dirs_made, other.dirs_made);
        push_new(&mut self.parents_made, other.parents_made);
        push_new(&mut self.trees_made, other.trees_made);
        push_new(&mut self.hosts, other.hosts);
        push_new(&mut self.pushes, other.pushes);
        self.shape.compound |= other.shape.compound;
        self.shape.opaque |= other.shape.opaque;
        self.shape.indirect |= other.shape.indirect;
    }
}

/// Appends the items of `from` that `into` does not hold yet, in order.
pub(crate) fn push_new<T: PartialEq>(into: &mut Vec<T>, from: Vec<T>) {
    for x in from {
        if !into.contains(&x) {
            into.push(x);
        }
    }
}
