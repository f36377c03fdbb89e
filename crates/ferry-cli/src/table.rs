//! Tables that fit their content (long topic and node names included):
//! columns sized by comfy-table, no borders, so lines stay easy to grep.

use comfy_table::{presets::NOTHING, Cell, CellAlignment, Table};

/// A table of `header` and `rows`; the columns numbered in `right` are
/// right-aligned (numbers).
pub fn render(header: &[&str], rows: Vec<Vec<String>>, right: &[usize]) -> String {
    let mut t = Table::new();
    t.load_preset(NOTHING);
    t.set_header(header.iter().map(Cell::new));
    for r in rows {
        t.add_row(r.into_iter().enumerate().map(|(i, c)| {
            let cell = Cell::new(c);
            if right.contains(&i) {
                cell.set_alignment(CellAlignment::Right)
            } else {
                cell
            }
        }));
    }
    // No terminal width cap: a pipe or a narrow window keeps whole names.
    t.to_string()
        .lines()
        .map(|l| l.strip_prefix(' ').unwrap_or(l).trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}
