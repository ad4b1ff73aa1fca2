//! The monthly series, read from `year,month,sunspots` CSV with the `csv` crate.
//!
//! Data: `examples/data/sunspots_monthly.csv`, monthly mean sunspot numbers 1749–2008
//! (public domain, NOAA NGDC via statsmodels; see `examples/data/README.md`).

use std::path::{Path, PathBuf};

use super::error::ExampleError;

/// The data file shipped with the repository.
pub fn default_data_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/sunspots_monthly.csv")
}

/// The monthly series.
#[derive(Clone, Debug)]
pub struct Series {
    /// `(year, month)` of each value.
    pub dates: Vec<(u16, u8)>,
    /// Mean sunspot number of each month.
    pub values: Vec<f32>,
}

/// One line of the data file.
#[derive(serde::Deserialize)]
struct Row {
    year: u16,
    month: u8,
    sunspots: f32,
}

/// Reads the series (a header line `year,month,sunspots`, then one month per line).
pub fn load_series(path: &Path) -> Result<Series, ExampleError> {
    let file = std::fs::File::open(path).map_err(|_| ExampleError::Missing {
        what: "data file",
        path: path.to_path_buf(),
    })?;
    let corrupt = |message: String| ExampleError::Corrupt {
        what: "data file",
        path: path.to_path_buf(),
        message,
    };
    let mut series = Series {
        dates: Vec::new(),
        values: Vec::new(),
    };
    for row in csv::Reader::from_reader(file).deserialize::<Row>() {
        let row = row.map_err(|e| match e.position() {
            Some(at) => corrupt(format!("line {}: {e}", at.line())),
            None => corrupt(e.to_string()),
        })?;
        if !row.sunspots.is_finite() || !(1..=12).contains(&row.month) {
            let line = series.values.len() + 2;
            return Err(corrupt(format!(
                "line {line}: expected a month in 1..=12 and a finite value, got month {} and {}",
                row.month, row.sunspots
            )));
        }
        series.dates.push((row.year, row.month));
        series.values.push(row.sunspots);
    }
    if series.values.len() < 100 {
        return Err(corrupt(format!(
            "{} months, need at least 100",
            series.values.len()
        )));
    }
    Ok(series)
}
