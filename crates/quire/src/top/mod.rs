//! `quire top`: a live view of a running quire, from its admin API's metrics (token
//! as for `quire purge`): requests per second by what the cache did, the hit ratio,
//! hit and miss latency quantiles, fills, renders, compression, origin errors,
//! rate-limited clients, the store, and the URLs missing most and the hottest,
//! refreshed every interval. `--once` prints one
//! plain-text frame (two scrapes an interval apart) for scripts; otherwise the view
//! is drawn with ratatui until `q`, Esc or Ctrl-C.
//!
//! - [`scrape`]: one `/_quire/metrics` fetched and parsed.
//! - [`frame`]: two scrapes made into rates, ratios and quantiles, and drawn as text.

mod frame;
mod scrape;

use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::widgets::{Block, Paragraph};

use crate::cli::TopArgs;

/// Runs `quire top`.
pub(crate) fn run(args: &TopArgs) -> anyhow::Result<()> {
    let token = args.admin.token()?;
    let authority = args.admin.authority()?;
    let server = &args.admin.server;
    let interval = Duration::from_secs_f64(args.interval.clamp(0.2, 60.0));
    let first = scrape::scrape(authority, token)?;
    if args.once {
        std::thread::sleep(interval);
        let now = scrape::scrape(authority, token)?;
        for line in framed(authority, token, &first, &now).lines(server) {
            println!("{line}");
        }
        return Ok(());
    }
    let mut terminal = ratatui::init();
    let result = live(&mut terminal, (authority, server), token, first, interval);
    ratatui::restore();
    result
}

/// The live view: a frame per interval until a quit key.
fn live(
    terminal: &mut ratatui::DefaultTerminal,
    (authority, server): (&str, &str),
    token: &str,
    mut previous: scrape::Samples,
    interval: Duration,
) -> anyhow::Result<()> {
    let mut lines = vec![format!("quire top: {server}, first frame in {interval:?}")];
    loop {
        let text = lines.join("\n");
        terminal.draw(|f| {
            let block = Block::bordered().title(" quire top · q quits ");
            f.render_widget(Paragraph::new(text.as_str()).block(block), f.area());
        })?;
        if quit_within(interval)? {
            return Ok(());
        }
        lines = match scrape::scrape(authority, token) {
            Ok(now) => {
                let l = framed(authority, token, &previous, &now).lines(server);
                previous = now;
                l
            }
            // The server may be restarting: say so, and keep trying.
            Err(e) => vec![format!("quire top: {server}: {e:#}")],
        };
    }
}

/// URLs shown of each kind.
const URLS_SHOWN: usize = 5;

/// The frame from `a` to `b`, with the top URLs when the server at `authority` has
/// them (an older server answers 404: the frame is shown without them).
fn framed(authority: &str, token: &str, a: &scrape::Samples, b: &scrape::Samples) -> frame::Frame {
    let mut f = frame::frame(a, b);
    if let Ok((missing, hot)) = scrape::top_urls(authority, token, URLS_SHOWN) {
        (f.missing, f.hot) = (missing, hot);
    }
    f
}

/// Waits `interval` for a quit key (`q`, Esc, Ctrl-C); true if one came.
fn quit_within(interval: Duration) -> anyhow::Result<bool> {
    let deadline = Instant::now() + interval;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if !event::poll(left)? {
            break;
        }
        if let Event::Key(k) = event::read()? {
            let ctrl_c =
                k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
            if k.kind == KeyEventKind::Press
                && (k.code == KeyCode::Char('q') || k.code == KeyCode::Esc || ctrl_c)
            {
                return Ok(true);
            }
        }
    }
    Ok(false)
}
