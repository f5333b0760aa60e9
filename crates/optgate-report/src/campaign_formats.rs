//! A campaign report ([`CampaignReport`]) in every format an experiment's report has:
//! Markdown, one self-contained HTML page, plain text fitted to a width, CSV and JUnit XML.
//! One set of builders says what the report shows (the proposal rows, the chain, the
//! combination, the checklist); a [`Style`] per format escapes input and marks names and
//! emphasis, so no value from a campaign file reaches any format as markup.

use std::fmt::Write as _;

use optgate_stats::Decision;

use crate::campaign::CampaignReport;
use crate::junit::{Case, Suite};
use crate::markup::{csv_cell, escape, markdown_text};
use crate::render::strings;

/// How a format writes text from input, a name, and emphasis.
trait Style {
    fn text(&self, s: &str) -> String;
    fn code(&self, s: &str) -> String;
    fn strong(&self, s: &str) -> String;
}

struct Markdown;
struct Html;
struct Plain;

impl Style for Markdown {
    fn text(&self, s: &str) -> String {
        markdown_text(s)
    }
    fn code(&self, s: &str) -> String {
        format!("`{}`", markdown_text(&s.replace('`', "'")))
    }
    fn strong(&self, s: &str) -> String {
        format!("**{}**", markdown_text(s))
    }
}

impl Style for Html {
    fn text(&self, s: &str) -> String {
        escape(s)
    }
    fn code(&self, s: &str) -> String {
        format!("<code>{}</code>", escape(s))
    }
    fn strong(&self, s: &str) -> String {
        format!("<strong>{}</strong>", escape(s))
    }
}

impl Style for Plain {
    fn text(&self, s: &str) -> String {
        s.to_string()
    }
    fn code(&self, s: &str) -> String {
        s.to_string()
    }
    fn strong(&self, s: &str) -> String {
        s.to_string()
    }
}

const PROPOSAL_HEADER: [&str; 7] = [
    "Stage",
    "Proposal",
    "App Impact",
    "System Impact",
    "Weighted Score",
    "Speed-up [interval]",
    "Decision",
];
const CHECKLIST_HEADER: [&str; 4] = ["Dimension", "Group", "Verdict", "Proposals / reason"];
const CHECKLIST_TITLE: &str = "Checklist (across the campaign)";

fn pct(x: Option<f64>) -> String {
    x.map_or("—".into(), |v| format!("{v:+.1} %"))
}

fn ratio(x: Option<f64>) -> String {
    x.map_or("—".into(), |v| format!("{v:.3}×"))
}

/// "Stages in the order run: …", saying when that is not the file's order.
fn stage_order(r: &CampaignReport) -> String {
    let order: Vec<&str> = r.stages.iter().map(|x| x.component.as_str()).collect();
    let mut s = format!("Stages in the order run: {}", order.join(" → "));
    if r.reordered {
        s.push_str(" (reordered from the file into the canonical order I/O → communication → memory → compute)");
    }
    s
}

/// Every stage's variants, in the order run: the decision and the cells of
/// [`PROPOSAL_HEADER`].
fn proposal_rows(r: &CampaignReport, st: &dyn Style) -> Vec<(Decision, Vec<String>)> {
    let mut rows = Vec::new();
    for (k, stage) in r.stages.iter().enumerate() {
        for v in &stage.variants {
            let won = if stage.winner.as_deref() == Some(v.name.as_str()) {
                " (winner)"
            } else {
                ""
            };
            let s = &v.speedup;
            rows.push((
                v.decision,
                vec![
                    format!("{} {}", k + 1, stage.component),
                    format!("{}{won}", st.code(&v.name)),
                    pct(v.app_impact_pct),
                    pct(v.system_impact_pct),
                    v.weighted_score.map_or("—".into(), |w| format!("{w:.1}")),
                    format!(
                        "{} [{}, {}]",
                        ratio(s.estimate),
                        ratio(s.ci_low),
                        ratio(s.ci_high)
                    ),
                    v.decision.to_string(),
                ],
            ));
        }
    }
    rows
}

/// One item per stage: its experiment, its baseline and what became of its winner.
fn chain_items(r: &CampaignReport, st: &dyn Style) -> Vec<String> {
    r.stages
        .iter()
        .map(|s| {
            format!(
                "{} ({}): baseline = {}. {}",
                st.strong(s.component.as_str()),
                st.code(&s.experiment_id),
                st.text(&s.baseline),
                st.text(&s.winner_reason)
            )
        })
        .collect()
}

/// One item per setting two winners made.
fn overridden_items(r: &CampaignReport, st: &dyn Style) -> Vec<String> {
    r.overridden
        .iter()
        .map(|o| {
            format!(
                "{}: {} set it to {}, {} to {}; the later stage's holds.",
                st.code(&o.setting),
                st.text(&o.earlier.to_string()),
                st.text(&o.earlier_value.to_string()),
                st.text(&o.later.to_string()),
                st.text(&o.later_value.to_string())
            )
        })
        .collect()
}

/// The combination's paragraphs: its result against the prediction and any flag, or why
/// there is none (yet).
fn combined_paras(r: &CampaignReport, st: &dyn Style) -> Vec<String> {
    let Some(c) = &r.combined else {
        let why = r
            .no_combination
            .as_deref()
            .unwrap_or("the confirmation has not run yet");
        return vec![st.text(why)];
    };
    let x = &c.result;
    let mut paras = vec![format!(
        "The combination ({}) against the original baseline ({}): {} — speed-up {} [{}, {}]; the stages predicted {} (the product of the winners' speed-ups); interaction (measured / predicted) {} [{}, {}].",
        st.text(&c.configuration),
        st.code(&c.experiment_id),
        st.strong(x.decision.as_str()),
        ratio(x.speedup.estimate),
        ratio(x.speedup.ci_low),
        ratio(x.speedup.ci_high),
        ratio(x.predicted_speedup),
        ratio(x.interaction.estimate),
        ratio(x.interaction.ci_low),
        ratio(x.interaction.ci_high),
    )];
    if x.not_better_than_best_stage {
        paras.push(format!(
            "{} the combination is not better than its best single stage ({}).",
            st.strong("Flag:"),
            ratio(x.best_stage_speedup)
        ));
    }
    paras
}

/// The checklist's rows, cells of [`CHECKLIST_HEADER`].
fn checklist_rows(r: &CampaignReport, st: &dyn Style) -> Vec<Vec<String>> {
    r.checklist
        .iter()
        .map(|row| {
            let what = if row.variants.is_empty() {
                row.reason.clone().unwrap_or_default()
            } else {
                row.variants.join(", ")
            };
            vec![
                st.text(&row.title),
                st.text(&row.group),
                row.verdict.label().to_string(),
                st.text(&what),
            ]
        })
        .collect()
}

/// A Markdown table of cells already escaped.
fn md_table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
}

/// The report as Markdown, every value from input escaped ([`markdown_text`]).
pub fn render_markdown(r: &CampaignReport) -> String {
    let st = &Markdown;
    let mut s = format!("# Campaign {}\n\n", st.code(&r.name));
    if let Some(d) = &r.description {
        let _ = write!(s, "{}\n\n", st.text(d));
    }
    let _ = write!(s, "{}\n\n## Proposals\n\n", stage_order(r));
    let rows: Vec<Vec<String>> = proposal_rows(r, st).into_iter().map(|x| x.1).collect();
    md_table(&mut s, &PROPOSAL_HEADER, &rows);
    s.push_str("\n## Chain of baselines\n\n");
    for (k, item) in chain_items(r, st).iter().enumerate() {
        let _ = writeln!(s, "{}. {item}", k + 1);
    }
    for item in overridden_items(r, st) {
        let _ = write!(s, "\n- {item}");
    }
    s.push_str("\n## Combined\n\n");
    let _ = writeln!(s, "{}", combined_paras(r, st).join("\n\n"));
    let _ = write!(s, "\n## {CHECKLIST_TITLE}\n\n");
    md_table(&mut s, &CHECKLIST_HEADER, &checklist_rows(r, st));
    s
}

/// The report as one self-contained HTML page (the experiment page's frame and tables;
/// every value escaped, nothing loaded from anywhere).
pub fn render_html(r: &CampaignReport) -> String {
    use crate::html::{badge, heading, para, table};
    let st = &Html;
    let title = format!("optgate campaign report: {}", r.name);
    let mut out = crate::page::page_head(&title);
    heading(&mut out, 1, &title);
    if let Some(d) = &r.description {
        para(&mut out, d);
    }
    para(&mut out, &stage_order(r));
    heading(&mut out, 2, "Proposals");
    let rows: Vec<Vec<String>> = proposal_rows(r, st)
        .into_iter()
        .map(|(d, mut cells)| {
            cells[6] = badge(d, d.as_str());
            cells
        })
        .collect();
    let caption = "Every stage's proposals, in the order run";
    table(&mut out, caption, &strings(PROPOSAL_HEADER), &rows, 1);
    heading(&mut out, 2, "Chain of baselines");
    html_list(&mut out, "ol", &chain_items(r, st));
    html_list(&mut out, "ul", &overridden_items(r, st));
    heading(&mut out, 2, "Combined");
    for p in combined_paras(r, st) {
        let _ = writeln!(out, "<p>{p}</p>");
    }
    heading(&mut out, 2, CHECKLIST_TITLE);
    let rows = checklist_rows(r, st);
    table(
        &mut out,
        CHECKLIST_TITLE,
        &strings(CHECKLIST_HEADER),
        &rows,
        0,
    );
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

/// A list of items already HTML (nothing when there are none).
fn html_list(out: &mut String, tag: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "<{tag}>");
    for i in items {
        let _ = writeln!(out, "<li>{i}</li>");
    }
    let _ = writeln!(out, "</{tag}>");
}

/// The report as plain text within `width` characters (the experiment table's layout).
pub fn render_table_width(r: &CampaignReport, width: usize) -> String {
    use crate::render::{para, text_table};
    let st = &Plain;
    let mut out = String::new();
    para(&mut out, "", "", &format!("Campaign {}", r.name), width);
    if let Some(d) = &r.description {
        para(&mut out, "", "", d, width);
    }
    para(&mut out, "", "", &stage_order(r), width);
    out.push_str("\nProposals\n");
    let rows: Vec<Vec<String>> = proposal_rows(r, st).into_iter().map(|x| x.1).collect();
    out.push_str(&text_table(&strings(PROPOSAL_HEADER), &rows, width));
    out.push_str("\nChain of baselines\n");
    for (k, item) in chain_items(r, st).iter().enumerate() {
        para(&mut out, &format!("{}. ", k + 1), "   ", item, width);
    }
    for item in overridden_items(r, st) {
        para(&mut out, "- ", "  ", &item, width);
    }
    out.push_str("\nCombined\n");
    for p in combined_paras(r, st) {
        para(&mut out, "", "", &p, width);
    }
    let _ = write!(out, "\n{CHECKLIST_TITLE}\n");
    let rows = checklist_rows(r, st);
    out.push_str(&text_table(&strings(CHECKLIST_HEADER), &rows, width));
    crate::terminal::for_terminal(&out).into_owned()
}

const CSV_HEADER: &str = "stage,component,experiment_id,variant,winner,decision,app_impact_pct,\
                          system_impact_pct,weighted_score,speedup,speedup_ci_low,speedup_ci_high,reason";

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v}"))
}

/// One row per proposal of every stage, in the order run, then one for the combination
/// when it ran (component `combined`); every text cell through [`csv_cell`].
pub fn render_csv(r: &CampaignReport) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    for (k, stage) in r.stages.iter().enumerate() {
        for v in &stage.variants {
            let winner = stage.winner.as_deref() == Some(v.name.as_str());
            let cells = [
                (k + 1).to_string(),
                stage.component.to_string(),
                csv_cell(&stage.experiment_id),
                csv_cell(&v.name),
                winner.to_string(),
                v.decision.to_string(),
                opt(v.app_impact_pct),
                opt(v.system_impact_pct),
                opt(v.weighted_score),
                opt(v.speedup.estimate),
                opt(v.speedup.ci_low),
                opt(v.speedup.ci_high),
                csv_cell(&v.reason),
            ];
            let _ = writeln!(out, "{}", cells.join(","));
        }
    }
    if let Some(c) = &r.combined {
        let x = &c.result;
        let cells = [
            (r.stages.len() + 1).to_string(),
            "combined".to_string(),
            csv_cell(&c.experiment_id),
            optgate_experiment::campaign::COMBINED.to_string(),
            String::new(),
            x.decision.to_string(),
            String::new(),
            String::new(),
            String::new(),
            opt(x.speedup.estimate),
            opt(x.speedup.ci_low),
            opt(x.speedup.ci_high),
            csv_cell(&x.reason),
        ];
        let _ = writeln!(out, "{}", cells.join(","));
    }
    out
}

/// The report as JUnit XML: a suite per stage (a case per proposal), then a suite for
/// the combination with its one case, valid against the schema the experiment's is.
pub fn render_junit(r: &CampaignReport) -> String {
    let mut suites: Vec<Suite> = r
        .stages
        .iter()
        .enumerate()
        .map(|(k, s)| Suite {
            name: format!("{}/{} {}", r.name, k + 1, s.component),
            properties: vec![
                ("experiment_id".into(), s.experiment_id.clone()),
                ("baseline".into(), s.baseline.clone()),
                ("winner".into(), s.winner.clone().unwrap_or_default()),
            ],
            cases: s.variants.iter().map(Case::of).collect(),
        })
        .collect();
    if let Some(c) = &r.combined {
        suites.push(Suite {
            name: format!("{}/combined", r.name),
            properties: vec![
                ("experiment_id".into(), c.experiment_id.clone()),
                ("configuration".into(), c.configuration.clone()),
            ],
            cases: vec![Case {
                name: optgate_experiment::campaign::COMBINED.to_string(),
                decision: c.result.decision,
                reason: c.result.reason.clone(),
                summary: combined_paras(r, &Plain).join(" "),
            }],
        });
    }
    crate::junit::document(&suites)
}
