//! The forecast picture: the held-back months, real and forecast one month ahead, as an
//! SVG drawn with `plotters`.

use std::path::Path;

use plotters::prelude::*;

use super::data::Series;
use super::error::ExampleError;
use super::evaluate::Evaluation;

/// Writes an SVG of the held-back months: the real series (black) and the one-month-ahead
/// forecasts (red), against the date.
pub fn write_svg(
    path: &Path,
    series: &Series,
    evaluation: &Evaluation,
) -> Result<(), ExampleError> {
    let failed = |e: &dyn std::fmt::Display| ExampleError::Corrupt {
        what: "plot",
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let start = evaluation.start;
    let actual = &series.values[start..];
    let year = |i: usize| {
        let (y, m) = series.dates[start + i];
        y as f64 + (m as f64 - 0.5) / 12.0
    };
    let top = actual
        .iter()
        .chain(&evaluation.forecasts)
        .fold(1.0f32, |m, &v| m.max(v)) as f64
        * 1.05;
    let root = SVGBackend::new(path, (900, 380)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    let caption = format!(
        "Monthly sunspot number, held-back months: real and one-month-ahead forecast (RMSE {:.1}, persistence {:.1})",
        evaluation.rmse, evaluation.persistence_rmse
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 14))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(year(0)..year(actual.len() - 1), 0.0..top)
        .map_err(|e| failed(&e))?;
    chart
        .configure_mesh()
        .x_desc("year")
        .y_desc("sunspot number")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(|e| failed(&e))?;
    let line = |values: &[f32]| {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| (year(i), v as f64))
            .collect::<Vec<_>>()
    };
    chart
        .draw_series(LineSeries::new(line(actual), &BLACK))
        .map_err(|e| failed(&e))?
        .label("real")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK));
    chart
        .draw_series(LineSeries::new(line(&evaluation.forecasts), &RED))
        .map_err(|e| failed(&e))?
        .label("LSTM forecast")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| failed(&e))?;
    root.present().map_err(|e| failed(&e))
}
