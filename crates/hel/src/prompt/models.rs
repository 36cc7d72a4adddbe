//! `/model` with no name: the models the server offers
//! (`GET {base_url}/models`, OpenAI-compatible `{"data": [{"id": …}]}`),
//! the current one marked. The answer is the server's: read to a bound,
//! parsed within limits, every id shown escaped.

use std::time::Duration;

use hel_agent::Endpoint;

/// How long the listing may take in all.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The most of the answer read.
const MAX_BYTES: usize = 1024 * 1024;
/// The most models listed.
const MAX_MODELS: usize = 500;

/// The ids the server at `endpoint` lists, sorted; `Err` says why there
/// are none.
pub async fn list(endpoint: &Endpoint) -> Result<Vec<String>, String> {
    let url = format!("{}/models", endpoint.config.base_url);
    match tokio::time::timeout(TIMEOUT, fetch(&url, endpoint.api_key.as_deref())).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {} s", TIMEOUT.as_secs())),
    }
}

async fn fetch(url: &str, key: Option<&str>) -> Result<Vec<String>, String> {
    let http = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let mut req = http.get(url);
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let mut resp = req.send().await.map_err(|e| e.without_url().to_string())?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("HTTP {}", status.as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| e.without_url().to_string())?
    {
        if body.len() + chunk.len() > MAX_BYTES {
            return Err(format!("an answer over {} KiB", MAX_BYTES / 1024));
        }
        body.extend_from_slice(&chunk);
    }
    ids(&body)
}

/// The model ids of an OpenAI-compatible `/models` answer.
fn ids(body: &[u8]) -> Result<Vec<String>, String> {
    let value = hel_store::json::parse(body, hel_store::json::Limits::SMALL)
        .map_err(|_| "an answer that is not the JSON of a model list".to_owned())?;
    let data = value
        .get("data")
        .and_then(|d| d.as_array())
        .ok_or("an answer with no `data` list")?;
    let mut ids: Vec<String> = data
        .iter()
        .filter_map(|m| m.get("id")?.as_str())
        .take(MAX_MODELS)
        .map(str::to_owned)
        .collect();
    ids.sort();
    ids.dedup();
    if ids.is_empty() {
        return Err("an empty model list".into());
    }
    Ok(ids)
}

/// The lines `/model` shows: the ids, `current` marked (and named first
/// when the server does not list it).
pub fn lines(ids: &[String], current: &str, width: usize) -> Vec<String> {
    let esc = |s: &str| hel_agent::text::escape_line(s).into_owned();
    let mut out = vec![format!(
        "hel: the server offers {}; /model NAME switches:",
        crate::render::count(ids.len() as u64, "model", "models")
    )];
    if !ids.iter().any(|i| i == current) {
        out.push(format!("* {} (the model now; not listed)", esc(current)));
    }
    for id in ids {
        let mark = if id == current { '*' } else { ' ' };
        out.push(crate::render::fit(&format!("{mark} {}", esc(id)), width));
    }
    out
}

/// The one line when the server gave no list.
pub fn failed(why: &str) -> String {
    format!(
        "hel: cannot list the server's models ({}); /model NAME sets one",
        hel_agent::text::escape_line(why)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_a_model_list() {
        let body = br#"{"object":"list","data":[{"id":"b"},{"id":"a"},{"x":1},{"id":"a"}]}"#;
        assert_eq!(ids(body).unwrap(), ["a", "b"]);
        assert!(ids(b"{}").is_err());
        assert!(ids(br#"{"data":[]}"#).is_err());
        assert!(ids(b"not json").is_err());
        let l = lines(&["a".into(), "b".into()], "b", 80);
        assert_eq!(l[1..], ["  a", "* b"]);
        let l = lines(&["a".into()], "z\u{1b}", 80);
        assert!(l[1].starts_with("* z") && !l[1].contains('\u{1b}'));
    }
}
