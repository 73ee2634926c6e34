//! What `repair` says, a row per PV, written as each PV is planned or done: a table
//! (NAME, CLAIM, STATUS, DETAIL) or a JSON array (closed at the end; the rows so far
//! are flushed one by one).

use std::io::{self, Write};

use serde::Serialize;

use super::RepairError;
use super::plan::{Journal, TopologyClaims, Writer};
use crate::cli::ReportFormat;

/// What became of one PV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RowStatus {
    /// Without `--apply`: this is what would be done.
    WouldRepair,
    /// Without `--apply`: an unfinished repair, which `--apply` finishes.
    WouldResume,
    /// Recreated with its topology, bound to its claim, its reclaim policy given back.
    Repaired,
    /// Its nodeAffinity is complete, or another run finished it.
    NothingToDo,
    /// Not touched (or put back as it was), for the reason given.
    LeftAlone,
    /// An unfinished repair that could not go on; its journal is kept on the claim.
    Stuck,
}

impl RowStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RowStatus::WouldRepair => "would-repair",
            RowStatus::WouldResume => "would-resume",
            RowStatus::Repaired => "repaired",
            RowStatus::NothingToDo => "nothing-to-do",
            RowStatus::LeftAlone => "left-alone",
            RowStatus::Stuck => "stuck",
        }
    }

    fn is_fine(self) -> bool {
        !matches!(self, RowStatus::LeftAlone | RowStatus::Stuck)
    }
}

/// One PV's row; the JSON output's field names are these (stable).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub name: String,
    /// `namespace/name` of its claim.
    pub claim: Option<String>,
    pub status: RowStatus,
    pub detail: String,
    /// The topology the new PV gets (labels and nodeAffinity).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyClaims>,
    /// Who writes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written_by: Option<Writer>,
    /// Pods holding the claim.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<String>,
}

impl Row {
    fn new(name: &str, claim: Option<String>, status: RowStatus, detail: String) -> Self {
        Self {
            name: name.to_owned(),
            claim,
            status,
            detail,
            topology: None,
            written_by: None,
            pods: Vec::new(),
        }
    }

    pub fn left_alone(name: &str, claim: Option<String>, reason: String) -> Self {
        Self::new(name, claim, RowStatus::LeftAlone, reason)
    }

    pub fn nothing_to_do(name: &str, claim: Option<String>, reason: String) -> Self {
        Self::new(name, claim, RowStatus::NothingToDo, reason)
    }

    pub fn stuck(name: String, claim: String, reason: String) -> Self {
        Self::new(&name, Some(claim), RowStatus::Stuck, reason)
    }

    fn with_journal(mut self, journal: &Journal) -> Self {
        self.topology = Some(journal.topology.clone());
        self.written_by = Some(journal.writer);
        self
    }

    pub fn planned(journal: &Journal, claim: String) -> Self {
        let detail = format!(
            "recreate with {}, written by {}; reclaim policy Retain during the repair, then {}",
            journal.topology.describe(),
            journal.writer.as_str(),
            journal.reclaim_policy
        );
        Self::new(&journal.pv, Some(claim), RowStatus::WouldRepair, detail).with_journal(journal)
    }

    pub fn planned_resume(journal: &Journal, claim: String) -> Self {
        let detail = format!(
            "an unfinished repair (journal on the claim): --apply finishes it, {} written by {}",
            journal.topology.describe(),
            journal.writer.as_str()
        );
        Self::new(&journal.pv, Some(claim), RowStatus::WouldResume, detail).with_journal(journal)
    }

    pub fn repaired(journal: &Journal, claim: String) -> Self {
        let detail = format!(
            "recreated with {} (written by {}), Bound to its claim, reclaim policy {}",
            journal.topology.describe(),
            journal.writer.as_str(),
            journal.reclaim_policy
        );
        Self::new(&journal.pv, Some(claim), RowStatus::Repaired, detail).with_journal(journal)
    }

    pub fn with_pods(mut self, pods: Vec<String>) -> Self {
        self.pods = pods;
        self
    }
}

/// The rows being written to `out`.
#[derive(Debug)]
pub struct Report<W> {
    out: W,
    format: ReportFormat,
    rows: usize,
    left_alone: usize,
}

impl<W: Write> Report<W> {
    pub fn new(out: W, format: ReportFormat) -> Self {
        Self {
            out,
            format,
            rows: 0,
            left_alone: 0,
        }
    }

    /// Writes one row and flushes it.
    pub fn row(&mut self, row: &Row) -> Result<(), RepairError> {
        self.write_row(row).map_err(RepairError::Output)
    }

    fn write_row(&mut self, row: &Row) -> io::Result<()> {
        let mut text = String::new();
        match self.format {
            ReportFormat::Json => {
                text.push_str(if self.rows == 0 { "[\n" } else { ",\n" });
                // Strings and maps of strings: serializing cannot fail.
                let object = serde_json::to_string_pretty(row).unwrap_or_default();
                let indented: Vec<String> = object.lines().map(|l| format!("  {l}")).collect();
                text.push_str(&indented.join("\n"));
            }
            ReportFormat::Table => {
                if self.rows == 0 {
                    text.push_str(&line(["NAME", "CLAIM", "STATUS", "DETAIL"]));
                }
                let mut detail = row.detail.clone();
                if !row.pods.is_empty() && !detail.contains(&row.pods[0]) {
                    detail.push_str(&format!("; pods using the claim: {}", row.pods.join(", ")));
                }
                text.push_str(&line([
                    row.name.as_str(),
                    row.claim.as_deref().unwrap_or("-"),
                    row.status.as_str(),
                    detail.as_str(),
                ]));
            }
        }
        self.rows += 1;
        if !row.status.is_fine() {
            self.left_alone += 1;
        }
        self.out.write_all(text.as_bytes())?;
        self.out.flush()
    }

    /// Closes the document; the exit status (0, or 2 when a PV was left alone).
    pub fn finish(mut self) -> Result<u8, RepairError> {
        let closing = match (self.format, self.rows) {
            (ReportFormat::Json, 0) => "[]\n",
            (ReportFormat::Json, _) => "\n]\n",
            (ReportFormat::Table, _) => "",
        };
        self.out
            .write_all(closing.as_bytes())
            .and_then(|()| self.out.flush())
            .map_err(RepairError::Output)?;
        if self.rows == 0 {
            eprintln!("repair: no PV selected needs a repair");
        }
        Ok(if self.left_alone == 0 { 0 } else { 2 })
    }
}

fn line(cells: [&str; 4]) -> String {
    format!("{:<24} {:<32} {:<13} {}\n", cells[0], cells[1], cells[2], cells[3])
}
