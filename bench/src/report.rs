//! Benchmark records and the statistics behind them.
//!
//! Every subcommand of `gaspi-bench` produces a list of [`Record`]s, one per
//! (benchmark, transport, size) point, and hands it to [`emit`], which either
//! prints an aligned, human-readable table ([`print_table`]) or one JSON
//! object per line ([`print_json`]).
//!
//! The JSON format is shared with the external reference programs (for
//! example `bench/peers/mpi_put_pingpong.c`, run by `bench/compare-mpi.sh`),
//! so that our figures and the reference figures of the same run can be
//! joined by `(bench, size)`. Fields are written in declaration order and
//! fields that do not apply (`None`) are left out entirely, e.g.
//!
//! ```text
//! {"bench":"pingpong","transport":"shm","ranks":2,"size":8,"iters":10000,"median_us":0.41,"p10_us":0.39,"p90_us":0.47}
//! ```
//!
//! Timings are collected as [`Samples`] (microseconds) and summarised by the
//! median and the 10th/90th percentiles (linear interpolation between order
//! statistics, the same definition as NumPy's default `percentile`).

use serde::Serialize;
use std::io::{self, Write};

/// One benchmark result: one line of JSON or one row of the table.
///
/// Latencies are in microseconds, bandwidths in GB/s with GB = 1e9 bytes.
#[derive(Serialize, Debug, Clone, Default, PartialEq)]
pub struct Record {
    /// Benchmark name, e.g. `"pingpong"`, `"write-bw"`, `"floor-memcpy"`.
    pub bench: String,
    /// Transport or implementation measured, e.g. `"shm"`, `"mpi-osc"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// Number of ranks (processes) taking part.
    pub ranks: u32,
    /// Message size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Number of timed iterations (warm-up excluded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iters: Option<u64>,
    /// Median time per operation, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_us: Option<f64>,
    /// 10th percentile time per operation, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p10_us: Option<f64>,
    /// 90th percentile time per operation, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p90_us: Option<f64>,
    /// Bandwidth in GB/s (1e9 bytes per second), usually from the median.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// Name of the reference this result is compared with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ref_name: Option<String>,
    /// Reference latency, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ref_us: Option<f64>,
    /// Reference bandwidth, GB/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ref_gbps: Option<f64>,
    /// Ours divided by the reference (latency: `median_us / ref_us`,
    /// bandwidth: `gbps / ref_gbps`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// Slowest sample, microseconds (start-up: the slowest rank).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_us: Option<f64>,
    /// Start-up: the bootstrap used, as the start-up log line names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<String>,
    /// Start-up: bytes rank 0 sent for the bootstrap until its `init`
    /// returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank0_sent_bytes: Option<u64>,
    /// Start-up: bytes rank 0 received for the bootstrap until its `init`
    /// returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank0_received_bytes: Option<u64>,
    /// Start-up: control connections rank 0 held when `init` returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank0_connections: Option<u64>,
    /// Start-up: the most control connections any rank held when its
    /// `init` returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections_max: Option<u64>,
    /// Start-up: control connections per rank when `init` returned, mean
    /// over the ranks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections_mean: Option<f64>,
    /// Free-form remark (method, caveats, errors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Record {
    /// A record with only `bench` and `ranks` set.
    pub fn new(bench: impl Into<String>, ranks: u32) -> Self {
        Record {
            bench: bench.into(),
            ranks,
            ..Record::default()
        }
    }

    /// Fills `median_us`, `p10_us` and `p90_us` from `samples`
    /// (left untouched when `samples` is empty).
    pub fn with_samples(mut self, samples: &Samples) -> Self {
        if !samples.is_empty() {
            self.median_us = Some(samples.median());
            self.p10_us = Some(samples.p10());
            self.p90_us = Some(samples.p90());
        }
        self
    }

    /// Sets a latency reference and `ratio = median_us / ref_us`.
    #[allow(dead_code)] // API for the subcommands; not every build uses it
    pub fn with_ref_us(mut self, name: impl Into<String>, ref_us: f64) -> Self {
        self.ref_name = Some(name.into());
        self.ref_us = Some(ref_us);
        self.ratio = self.median_us.map(|m| m / ref_us);
        self
    }

    /// Sets a bandwidth reference and `ratio = gbps / ref_gbps`.
    #[allow(dead_code)] // API for the subcommands; not every build uses it
    pub fn with_ref_gbps(mut self, name: impl Into<String>, ref_gbps: f64) -> Self {
        self.ref_name = Some(name.into());
        self.ref_gbps = Some(ref_gbps);
        self.ratio = self.gbps.map(|g| g / ref_gbps);
        self
    }
}

/// Timing samples in microseconds.
///
/// The statistics sort a copy of the data; the order of insertion does not
/// matter. All statistics of an empty set are `NaN` (which serde_json writes
/// as `null`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples(pub Vec<f64>);

impl Samples {
    /// An empty set with room for `n` samples.
    pub fn with_capacity(n: usize) -> Self {
        Samples(Vec::with_capacity(n))
    }

    /// Adds one sample (microseconds).
    pub fn push(&mut self, us: f64) {
        self.0.push(us);
    }

    /// Number of samples.
    #[allow(dead_code)] // API for the subcommands; not every build uses it
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The raw samples in insertion order.
    #[allow(dead_code)] // API for the subcommands; not every build uses it
    pub fn as_slice(&self) -> &[f64] {
        &self.0
    }

    fn sorted(&self) -> Vec<f64> {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        v
    }

    /// The `p`-th percentile, `p` in `0.0..=100.0`, by linear interpolation
    /// between the two nearest order statistics (rank `p/100 * (n-1)`).
    ///
    /// # Panics
    /// If `p` is outside `0.0..=100.0` or NaN.
    pub fn percentile(&self, p: f64) -> f64 {
        assert!(
            (0.0..=100.0).contains(&p),
            "percentile must be in 0..=100, got {p}"
        );
        let v = self.sorted();
        if v.is_empty() {
            return f64::NAN;
        }
        let rank = p / 100.0 * (v.len() - 1) as f64;
        let lo = rank.floor() as usize;
        let hi = rank.ceil() as usize;
        let frac = rank - lo as f64;
        v[lo] + (v[hi] - v[lo]) * frac
    }

    /// The median (50th percentile).
    pub fn median(&self) -> f64 {
        self.percentile(50.0)
    }

    /// The 10th percentile.
    pub fn p10(&self) -> f64 {
        self.percentile(10.0)
    }

    /// The 90th percentile.
    pub fn p90(&self) -> f64 {
        self.percentile(90.0)
    }

    /// The smallest sample.
    #[allow(dead_code)] // API for the subcommands; not every build uses it
    pub fn min(&self) -> f64 {
        self.0
            .iter()
            .copied()
            .min_by(f64::total_cmp)
            .unwrap_or(f64::NAN)
    }
}

impl From<Vec<f64>> for Samples {
    fn from(v: Vec<f64>) -> Self {
        Samples(v)
    }
}

/// Byte count in binary units: `8 B`, `4 KiB`, `1 MiB`, `1.5 KiB`.
///
/// Exact multiples are written without decimals, others with one.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut unit = 0;
    while unit + 1 < UNITS.len() && bytes >= 1u64 << (10 * (unit + 1)) {
        unit += 1;
    }
    let scale = 1u64 << (10 * unit);
    if bytes.is_multiple_of(scale) {
        format!("{} {}", bytes / scale, UNITS[unit])
    } else {
        format!("{:.1} {}", bytes as f64 / scale as f64, UNITS[unit])
    }
}

/// A number with a precision that suits its magnitude.
fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() {
        format!("{x}")
    } else if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn opt_num(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), fmt_num)
}

/// The table columns: header and whether the column is right-aligned.
const COLUMNS: [(&str, bool); 12] = [
    ("bench", false),
    ("transport", false),
    ("ranks", true),
    ("size", true),
    ("iters", true),
    ("median us", true),
    ("p10 us", true),
    ("p90 us", true),
    ("GB/s", true),
    ("reference", false),
    ("ref value", true),
    ("ratio", true),
];

fn table_row(r: &Record) -> [String; 12] {
    let dash = || "-".to_string();
    let ref_value = match (r.ref_us, r.ref_gbps) {
        (Some(us), _) => format!("{} us", fmt_num(us)),
        (None, Some(g)) => format!("{} GB/s", fmt_num(g)),
        (None, None) => dash(),
    };
    [
        r.bench.clone(),
        r.transport.clone().unwrap_or_else(dash),
        r.ranks.to_string(),
        r.size.map_or_else(dash, human_size),
        r.iters.map_or_else(dash, |i| i.to_string()),
        opt_num(r.median_us),
        opt_num(r.p10_us),
        opt_num(r.p90_us),
        opt_num(r.gbps),
        r.ref_name.clone().unwrap_or_else(dash),
        ref_value,
        r.ratio.map_or_else(dash, |x| format!("{x:.2}")),
    ]
}

/// Writes the aligned table (header, rule, one row per record, then the
/// notes of records that have one) to `w`.
pub fn write_table<W: Write>(w: &mut W, records: &[Record]) -> io::Result<()> {
    let rows: Vec<[String; 12]> = records.iter().map(table_row).collect();
    let mut widths = COLUMNS.map(|(h, _)| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let write_line = |w: &mut W, cells: &[String]| -> io::Result<()> {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let width = widths[i];
            if COLUMNS[i].1 {
                line.push_str(&format!("{cell:>width$}"));
            } else {
                line.push_str(&format!("{cell:<width$}"));
            }
        }
        writeln!(w, "{}", line.trim_end())
    };
    let header: Vec<String> = COLUMNS.iter().map(|(h, _)| h.to_string()).collect();
    write_line(w, &header)?;
    let rule_len = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
    writeln!(w, "{}", "-".repeat(rule_len))?;
    for row in &rows {
        write_line(w, row)?;
    }
    for r in records.iter().filter(|r| r.note.is_some()) {
        let size = r.size.map(|s| format!(" {}", human_size(s)));
        let note = r.note.as_deref().unwrap_or_default();
        writeln!(w, "note: {}{}: {}", r.bench, size.unwrap_or_default(), note)?;
    }
    Ok(())
}

/// Writes one JSON object per record, one per line, to `w`.
pub fn write_json<W: Write>(w: &mut W, records: &[Record]) -> io::Result<()> {
    for r in records {
        serde_json::to_writer(&mut *w, r)?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// Reports a failed write to stdout on stderr; a closed pipe (e.g. `| head`)
/// is not an error worth reporting.
fn report_stdout_error(result: io::Result<()>) {
    if let Err(e) = result {
        if e.kind() != io::ErrorKind::BrokenPipe {
            eprintln!("gaspi-bench: writing results to stdout failed: {e}");
        }
    }
}

/// Prints the records as an aligned table to stdout.
pub fn print_table(records: &[Record]) {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    report_stdout_error(write_table(&mut out, records).and_then(|()| out.flush()));
}

/// Prints the records as JSON lines (one object per record) to stdout.
pub fn print_json(records: &[Record]) {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    report_stdout_error(write_json(&mut out, records).and_then(|()| out.flush()));
}

/// Prints the records as JSON lines when `json` is set, as a table otherwise.
pub fn emit(records: &[Record], json: bool) {
    if json {
        print_json(records);
    } else {
        print_table(records);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn percentile_interpolates_linearly() {
        // Deliberately unsorted; sorted: 1 2 3 4 10.
        let s = Samples(vec![10.0, 2.0, 4.0, 1.0, 3.0]);
        assert!(close(s.percentile(0.0), 1.0));
        assert!(close(s.percentile(100.0), 10.0));
        assert!(close(s.median(), 3.0));
        // rank 0.1*4 = 0.4 -> 1 + 0.4*(2-1)
        assert!(close(s.p10(), 1.4));
        // rank 0.9*4 = 3.6 -> 4 + 0.6*(10-4)
        assert!(close(s.p90(), 7.6));
        // rank 0.625*4 = 2.5 -> halfway between 3 and 4
        assert!(close(s.percentile(62.5), 3.5));
        assert!(close(s.min(), 1.0));
    }

    #[test]
    fn median_of_even_count_is_mean_of_middle_pair() {
        let s = Samples(vec![4.0, 1.0, 3.0, 2.0]);
        assert!(close(s.median(), 2.5));
    }

    #[test]
    fn single_and_empty_samples() {
        let one = Samples(vec![5.0]);
        assert!(close(one.p10(), 5.0) && close(one.p90(), 5.0));
        let none = Samples::default();
        assert!(none.median().is_nan() && none.min().is_nan());
    }

    #[test]
    #[should_panic]
    fn percentile_out_of_range_panics() {
        Samples(vec![1.0]).percentile(100.5);
    }

    #[test]
    fn json_line_contains_exactly_the_present_fields_in_order() {
        let r = Record {
            bench: "pingpong".into(),
            transport: Some("shm".into()),
            ranks: 2,
            size: Some(8),
            iters: Some(1000),
            median_us: Some(0.5),
            p10_us: Some(0.25),
            p90_us: Some(0.75),
            ..Record::default()
        };
        let mut buf = Vec::new();
        write_json(&mut buf, std::slice::from_ref(&r)).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(
            text,
            "{\"bench\":\"pingpong\",\"transport\":\"shm\",\"ranks\":2,\"size\":8,\
             \"iters\":1000,\"median_us\":0.5,\"p10_us\":0.25,\"p90_us\":0.75}\n"
        );
        let v: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut want = [
            "bench",
            "transport",
            "ranks",
            "size",
            "iters",
            "median_us",
            "p10_us",
            "p90_us",
        ];
        want.sort_unstable();
        assert_eq!(keys, want);
    }

    #[test]
    fn json_minimal_record_and_one_line_per_record() {
        let recs = vec![Record::new("a", 1), Record::new("b", 4)];
        let mut buf = Vec::new();
        write_json(&mut buf, &recs).unwrap();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "{\"bench\":\"a\",\"ranks\":1}\n{\"bench\":\"b\",\"ranks\":4}\n"
        );
    }

    #[test]
    fn reference_ratio() {
        let r = Record::new("pingpong", 2)
            .with_samples(&Samples(vec![2.0, 2.0, 2.0]))
            .with_ref_us("mpi-osc", 4.0);
        assert_eq!(r.ratio, Some(0.5));
        let mut b = Record::new("write-bw", 2);
        b.gbps = Some(6.0);
        let b = b.with_ref_gbps("mpi-osc", 3.0);
        assert_eq!(b.ratio, Some(2.0));
    }

    #[test]
    fn human_size_units() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(8), "8 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1024), "1 KiB");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(4096), "4 KiB");
        assert_eq!(human_size(1 << 20), "1 MiB");
        assert_eq!(human_size(64 << 20), "64 MiB");
        assert_eq!(human_size(3 << 30), "3 GiB");
    }

    #[test]
    fn table_is_aligned_and_shows_missing_as_dash() {
        let mut r = Record::new("write-bw", 2).with_samples(&Samples(vec![100.0, 200.0, 300.0]));
        r.transport = Some("shm".into());
        r.size = Some(1 << 20);
        r.gbps = Some(5.24288);
        let r = r.with_ref_gbps("mpi-osc", 2.62144);
        let recs = vec![r, Record::new("floor-cacheline-pingpong", 2)];
        let mut buf = Vec::new();
        write_table(&mut buf, &recs).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("bench"));
        assert!(lines[2].contains("1 MiB") && lines[2].contains("2.00"));
        assert!(lines[2].contains("2.62 GB/s"));
        assert!(lines[3].contains(" - "));
        // The "ranks" column ends at the same offset in every row.
        let end = |l: &str, pat: &str| l.find(pat).map(|i| i + pat.len());
        assert_eq!(end(lines[0], "ranks"), end(lines[2], " 2"));
    }
}
