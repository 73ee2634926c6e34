//! The report, written as the PVs are judged, a page at a time: memory holds one page
//! of rows, not the cluster's. The table's widths are the widest cell so far: the
//! header and the first page line up with each other, a later page's rows with the
//! first page's whenever its cells are no wider (a wider cell widens the columns from
//! its page on). The JSON array is the same document [`render`] writes whole; it is
//! closed when the audit stops on an error too, so the rows so far still parse. The
//! counts by status give the summary and the exit status at the end.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use super::{Finding, Status};
use crate::cli::ReportFormat;

const HEADER: [&str; 4] = ["NAME", "VOLUME", "STATUS", "DETAIL"];

/// Every status, in the order the summary lists them.
const STATUSES: [Status; 7] = [
    Status::Fine,
    Status::NotOurs,
    Status::LabelsFixed,
    Status::MissingLabels,
    Status::MissingAffinity,
    Status::Contradicts,
    Status::Unresolvable,
];

/// The report being written to `out`.
#[derive(Debug)]
pub struct Report<W> {
    out: W,
    output: ReportFormat,
    /// Table: the widths of the first three columns so far; none before the header.
    widths: Option<[usize; 3]>,
    rows: usize,
    counts: [usize; STATUSES.len()],
}

impl<W: Write> Report<W> {
    pub fn new(out: W, output: ReportFormat) -> Self {
        Self {
            out,
            output,
            widths: None,
            rows: 0,
            counts: [0; STATUSES.len()],
        }
    }

    /// Writes the rows of one page and flushes them.
    pub fn page(&mut self, findings: &[Finding]) -> io::Result<()> {
        let mut text = String::new();
        match self.output {
            ReportFormat::Json => {
                for finding in findings {
                    text.push_str(if self.rows == 0 { "[\n" } else { ",\n" });
                    // Serializing strings and maps of strings cannot fail.
                    let object = serde_json::to_string_pretty(finding).unwrap_or_default();
                    for (index, line) in object.lines().enumerate() {
                        if index > 0 {
                            text.push('\n');
                        }
                        text.push_str("  ");
                        text.push_str(line);
                    }
                    self.count(finding);
                }
            }
            ReportFormat::Table => {
                let cells: Vec<[&str; 4]> = findings
                    .iter()
                    .map(|f| {
                        [
                            f.name.as_str(),
                            f.volume.as_deref().unwrap_or("-"),
                            f.status.as_str(),
                            f.detail.as_str(),
                        ]
                    })
                    .collect();
                let header = self.widths.is_none();
                let mut widths = self.widths.unwrap_or_default();
                for row in std::iter::once(&HEADER).filter(|_| header).chain(&cells) {
                    for (width, cell) in widths.iter_mut().zip(row) {
                        *width = (*width).max(cell.chars().count());
                    }
                }
                self.widths = Some(widths);
                for row in std::iter::once(&HEADER).filter(|_| header).chain(&cells) {
                    let [w0, w1, w2] = widths;
                    let _ = writeln!(text, "{:w0$}  {:w1$}  {:w2$}  {}", row[0], row[1], row[2], row[3]);
                }
                for finding in findings {
                    self.count(finding);
                }
            }
        }
        self.out.write_all(text.as_bytes())?;
        self.out.flush()
    }

    fn count(&mut self, finding: &Finding) {
        self.rows += 1;
        if let Some(index) = STATUSES.iter().position(|s| *s == finding.status) {
            self.counts[index] += 1;
        }
    }

    /// Ends the document: the JSON array's close (or `[]`), the table's header when no
    /// row came.
    pub fn finish(&mut self) -> io::Result<()> {
        match self.output {
            ReportFormat::Json if self.rows == 0 => self.out.write_all(b"[]\n")?,
            ReportFormat::Json => self.out.write_all(b"\n]\n")?,
            ReportFormat::Table if self.widths.is_none() => self.page(&[])?,
            ReportFormat::Table => {}
        }
        self.out.flush()
    }

    /// 0 when every PV is fine, 2 when one is not.
    pub fn exit_code(&self) -> u8 {
        let fine = STATUSES.iter().zip(self.counts).all(|(s, n)| s.is_fine() || n == 0);
        if fine { 0 } else { 2 }
    }

    /// `audit: 5 PVs judged in 3 pages: 4 fine, 1 missing-labels`.
    pub fn summary(&self, pages: usize) -> String {
        let mut line = format!("audit: {} judged in {}", plural(self.rows, "PV"), plural(pages, "page"));
        let counted: Vec<String> = STATUSES
            .iter()
            .zip(self.counts)
            .filter(|(_, n)| *n > 0)
            .map(|(s, n)| format!("{n} {s}"))
            .collect();
        if !counted.is_empty() {
            line.push_str(": ");
            line.push_str(&counted.join(", "));
        }
        line
    }

    /// The rows written.
    pub fn rows(&self) -> usize {
        self.rows
    }
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The report of `findings` whole, in the chosen format, ending with a newline.
pub fn render(findings: &[Finding], output: ReportFormat) -> String {
    let mut report = Report::new(Vec::new(), output);
    // Writing to a Vec cannot fail.
    let _ = report.page(findings).and_then(|()| report.finish());
    String::from_utf8_lossy(&report.out).into_owned()
}

/// When a long audit says how far it is on stderr: every [`PROGRESS_INTERVAL`].
#[derive(Debug)]
pub struct Progress {
    last: Instant,
}

/// How often a long audit reports its progress.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(10);

impl Progress {
    pub fn starting(now: Instant) -> Self {
        Self { last: now }
    }

    /// The progress line, when one is due at `now`.
    pub fn line(&mut self, now: Instant, judged: usize, page: usize) -> Option<String> {
        if now.duration_since(self.last) < PROGRESS_INTERVAL {
            return None;
        }
        self.last = now;
        Some(format!("audit: {} judged, page {page}", plural(judged, "PV")))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn finding(name: &str, status: Status) -> Finding {
        Finding {
            name: name.to_owned(),
            volume: None,
            status,
            detail: "why".to_owned(),
            missing_labels: BTreeMap::new(),
            missing_affinity: Vec::new(),
        }
    }

    #[test]
    fn pages_stream_into_one_json_array() {
        let all = [
            finding("a", Status::Fine),
            finding("b", Status::Contradicts),
            finding("c", Status::NotOurs),
        ];
        let mut report = Report::new(Vec::new(), ReportFormat::Json);
        report.page(&all[..2]).expect("written");
        report.page(&[]).expect("written");
        report.page(&all[2..]).expect("written");
        report.finish().expect("written");
        let streamed = String::from_utf8(report.out.clone()).expect("UTF-8");
        assert_eq!(
            streamed,
            format!("{}\n", serde_json::to_string_pretty(&all).expect("encodes"))
        );
        assert_eq!(report.exit_code(), 2);
        assert_eq!(
            report.summary(3),
            "audit: 3 PVs judged in 3 pages: 1 fine, 1 not-ours, 1 contradicts"
        );
        assert_eq!(render(&[], ReportFormat::Json), "[]\n");
    }

    #[test]
    fn table_widths_grow_and_an_empty_report_has_its_header() {
        let mut report = Report::new(Vec::new(), ReportFormat::Table);
        report.page(&[finding("short", Status::Fine)]).expect("written");
        report
            .page(&[finding("a-much-longer-name", Status::LabelsFixed)])
            .expect("written");
        report.page(&[finding("mid", Status::Fine)]).expect("written");
        report.finish().expect("written");
        let text = String::from_utf8(report.out.clone()).expect("UTF-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "NAME   VOLUME  STATUS  DETAIL");
        assert_eq!(lines[1], "short  -       fine    why");
        assert_eq!(lines[2], "a-much-longer-name  -       labels-fixed  why");
        assert_eq!(lines[3], "mid                 -       fine          why");
        assert_eq!(report.exit_code(), 0);
        assert_eq!(
            report.summary(1),
            "audit: 3 PVs judged in 1 page: 2 fine, 1 labels-fixed"
        );
        assert_eq!(render(&[], ReportFormat::Table), "NAME  VOLUME  STATUS  DETAIL\n");
    }

    #[test]
    fn progress_is_said_every_interval() {
        let start = Instant::now();
        let mut progress = Progress::starting(start);
        assert_eq!(progress.line(start + Duration::from_secs(9), 100, 1), None);
        assert_eq!(
            progress.line(start + Duration::from_secs(10), 30_000, 60).as_deref(),
            Some("audit: 30000 PVs judged, page 60")
        );
        assert_eq!(progress.line(start + Duration::from_secs(15), 1, 61), None);
        assert!(progress.line(start + Duration::from_secs(21), 1, 62).is_some());
    }
}
