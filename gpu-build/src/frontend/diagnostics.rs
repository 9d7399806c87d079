//! Collecting MLIR's diagnostics and showing them the way compilers do:
//! `kernels/vadd.mlir:3:5: error: message`, the source line, a caret.

use super::source::{SourceFile, SourceLocation};
use melior::diagnostic::{Diagnostic, DiagnosticSeverity};
use melior::ir::Location;
use melior::Context;
use std::cell::RefCell;
use std::rc::Rc;

/// One diagnostic, copied out of MLIR while its handler runs.
#[derive(Debug, Clone)]
pub(crate) struct Diag {
    pub severity: &'static str,
    pub line_col: Option<(usize, usize)>,
    pub message: String,
    pub notes: Vec<Diag>,
}

/// Everything MLIR reported since the last [`DiagnosticSink::take`].
#[derive(Clone, Default)]
pub(crate) struct DiagnosticSink(Rc<RefCell<Vec<Diag>>>);

impl DiagnosticSink {
    /// Routes every diagnostic of `context` here (instead of MLIR printing to stderr).
    pub fn attach(context: &Context) -> DiagnosticSink {
        let sink = DiagnosticSink::default();
        let shared = sink.0.clone();
        context.attach_diagnostic_handler(move |diagnostic| {
            shared.borrow_mut().push(copy(&diagnostic));
            true
        });
        sink
    }

    pub fn take(&self) -> Vec<Diag> {
        std::mem::take(&mut self.0.borrow_mut())
    }

    /// The collected errors and warnings rendered against `source`.
    pub fn render(&self, source: &SourceFile) -> String {
        render(&self.take(), source)
    }
}

pub(crate) fn render(diags: &[Diag], source: &SourceFile) -> String {
    let mut out = String::new();
    for diag in diags {
        render_one(diag, source, &mut out);
    }
    out.trim_end().to_string()
}

fn render_one(diag: &Diag, source: &SourceFile, out: &mut String) {
    match diag.line_col {
        Some((line, column)) => {
            let at = SourceLocation {
                file: source.display.clone(),
                line,
                column,
            };
            out.push_str(&format!("{at}: {}: {}\n", diag.severity, diag.message));
            if let Some(text) = source.line(line) {
                out.push_str(&format!(
                    "    {text}\n    {}^\n",
                    " ".repeat(column.saturating_sub(1))
                ));
            }
        }
        None => out.push_str(&format!(
            "{}: {}: {}\n",
            source.display, diag.severity, diag.message
        )),
    }
    for note in &diag.notes {
        render_one(note, source, out);
    }
}

fn copy(diagnostic: &Diagnostic) -> Diag {
    let severity = match diagnostic.severity() {
        DiagnosticSeverity::Error => "error",
        DiagnosticSeverity::Warning => "warning",
        DiagnosticSeverity::Note => "note",
        DiagnosticSeverity::Remark => "remark",
    };
    let notes = (0..diagnostic.note_count())
        .filter_map(|i| diagnostic.note(i).ok())
        .map(|note| copy(&note))
        .collect();
    Diag {
        severity,
        line_col: line_col(diagnostic.location()),
        message: diagnostic.to_string(),
        notes,
    }
}

/// The first file:line:col inside a (possibly named, fused or call-site) location.
pub(crate) fn line_col(location: Location) -> Option<(usize, usize)> {
    if location.is_file_line_col_range() {
        Some((
            location.file_line_col_range_start_line(),
            location.file_line_col_range_start_column(),
        ))
    } else if location.is_name() {
        line_col(location.name_child_location())
    } else if location.is_call_site() {
        line_col(location.call_site_callee())
    } else if location.is_fused() {
        (0..location.fused_num_locations()).find_map(|i| line_col(location.fused_location(i)))
    } else {
        None
    }
}
