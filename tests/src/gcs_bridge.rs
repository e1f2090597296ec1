//! A test-only bridge in front of fake-gcs-server for the two calls of object_store's GCS
//! client the emulator does not answer as GCS does (measured, see `gcs.rs`):
//!
//! - the XML API's simple upload, `PUT /BUCKET/OBJECT`: fake-gcs-server 1.54 answers it
//!   `400 invalid uploadType`;
//! - the XML LIST after a key, `GET /BUCKET?list-type=2&prefix=P&start-after=K` (how
//!   deltalake looks for commits newer than the one it has): the emulator ignores
//!   `start-after` and lists every key under the prefix, so a writer finds its own earlier
//!   commits again and fails ("Invalid table version").
//!
//! The LIST goes to the emulator's JSON API list, which honours `startOffset` (the first name
//! listed, where `start-after` is the last one skipped: `K` followed by a NUL character, the
//! smallest name after `K`), and its answer is written back as the XML API's
//! `ListBucketResult`; `prefix`, `delimiter`, `max-keys` and `continuation-token` are carried
//! over as `prefix`, `delimiter`, `maxResults` and `pageToken`. The emulator decides what is
//! listed.
//!
//! The upload is rewritten into the emulator's JSON API upload of the same bytes,
//! `POST /upload/storage/v1/b/BUCKET/o?uploadType=multipart`, and its condition is carried
//! over: `x-goog-if-generation-match: G` (object_store's put-if-absent sends `0`, its
//! conditional update the generation it read) becomes `ifGenerationMatch=G`, which the
//! emulator itself checks (a `412` comes from the emulator, never from here). The JSON
//! upload's answer becomes the XML API's: the object's `ETag` and `x-goog-generation`
//! headers. The multipart form rather than `uploadType=media`: measured, the emulator ignores
//! `ifGenerationMatch` on media uploads and checks it on multipart ones.
//!
//! Every other request (GET, HEAD, LIST, DELETE, a PUT with `x-goog-copy-source` or a
//! multipart part) goes through unchanged, answers included. The bridge has no state and no
//! semantics of its own: it decides nothing a store decides.

use std::net::SocketAddr;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

/// Headers of the client's request that describe the hop, not the object.
const HOP_HEADERS: [&str; 4] = ["host", "content-length", "connection", "transfer-encoding"];

#[derive(Debug, Clone)]
struct Upstream {
    /// `http://127.0.0.1:PORT` of the emulator.
    base: String,
    client: reqwest::Client,
}

/// Starts the bridge on a thread of its own (it outlives any test's runtime) in front of
/// the emulator at `upstream`; its address.
pub(crate) fn spawn(upstream: String) -> Result<SocketAddr, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let state = Upstream {
        base: upstream,
        client: reqwest::Client::new(),
    };
    std::thread::Builder::new()
        .name("gcs-bridge".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the GCS bridge");
            runtime.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(listener).expect("the bridge's listener");
                let app = axum::Router::new().fallback(forward).with_state(state);
                axum::serve(listener, app)
                    .await
                    .expect("the GCS bridge serves");
            });
        })
        .map_err(|e| e.to_string())?;
    Ok(addr)
}

async fn forward(State(upstream): State<Upstream>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let simple_upload = parts.method == Method::PUT
        && !parts.headers.contains_key("x-goog-copy-source")
        && parts.uri.query().is_none_or(|q| !q.contains("uploadId="));
    let list_after = parts.method == Method::GET
        && parts
            .uri
            .query()
            .is_some_and(|q| q.contains("start-after="));
    let answer = if simple_upload {
        upload(&upstream, parts.uri.path(), &parts.headers, body).await
    } else if list_after {
        list(
            &upstream,
            parts.uri.path(),
            parts.uri.query().unwrap_or_default(),
        )
        .await
    } else {
        pass(&upstream, parts.method, &target, &parts.headers, body).await
    };
    answer.unwrap_or_else(|e| (StatusCode::BAD_GATEWAY, e.to_string()).into_response())
}

/// The request as it came, and the emulator's answer as it came.
async fn pass(
    upstream: &Upstream,
    method: Method,
    target: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> reqwest::Result<Response> {
    let mut request = upstream
        .client
        .request(method, format!("{}{target}", upstream.base));
    for (name, value) in headers {
        if !HOP_HEADERS.contains(&name.as_str()) {
            request = request.header(name, value);
        }
    }
    relay(request.body(body).send().await?).await
}

async fn relay(response: reqwest::Response) -> reqwest::Result<Response> {
    let status = response.status();
    let mut headers = response.headers().clone();
    for hop in HOP_HEADERS {
        headers.remove(hop);
    }
    let body = response.bytes().await?;
    let mut answer = Response::new(Body::from(body));
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    Ok(answer)
}

/// `PUT /BUCKET/OBJECT` as the JSON API's multipart upload, its condition kept.
async fn upload(
    upstream: &Upstream,
    path: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> reqwest::Result<Response> {
    let Some((bucket, object)) = path.trim_start_matches('/').split_once('/') else {
        return Ok((StatusCode::BAD_REQUEST, "no object in the path").into_response());
    };
    let name = percent_decode(object);
    let mut query = vec![("uploadType", "multipart".to_owned())];
    if let Some(generation) = headers
        .get("x-goog-if-generation-match")
        .and_then(|v| v.to_str().ok())
    {
        query.push(("ifGenerationMatch", generation.to_owned()));
    }
    let boundary = format!("tablekeeper-gcs-bridge-{}", uuid::Uuid::new_v4());
    let metadata = serde_json::json!({ "name": name });
    let mut form = format!(
        "--{boundary}\r\ncontent-type: application/json\r\n\r\n{metadata}\r\n--{boundary}\r\n\
         content-type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    form.extend_from_slice(&body);
    form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let response = upstream
        .client
        .post(format!("{}/upload/storage/v1/b/{bucket}/o", upstream.base))
        .query(&query)
        .header(
            "content-type",
            format!("multipart/related; boundary={boundary}"),
        )
        .body(form)
        .send()
        .await?;
    if !response.status().is_success() {
        return relay(response).await;
    }
    let object: serde_json::Value = response.json().await?;
    let mut answer = StatusCode::OK.into_response();
    for (header, value) in [
        (
            "etag",
            format!("\"{}\"", object["etag"].as_str().unwrap_or_default()),
        ),
        (
            "x-goog-generation",
            object["generation"].as_str().unwrap_or_default().to_owned(),
        ),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            answer.headers_mut().insert(header, value);
        }
    }
    Ok(answer)
}

/// The XML LIST after a key as the JSON API's list from the next name, answered in XML.
async fn list(upstream: &Upstream, path: &str, query: &str) -> reqwest::Result<Response> {
    let bucket = path.trim_matches('/');
    let mut json_query: Vec<(&str, String)> = Vec::new();
    let mut prefix = String::new();
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let carried = match key.as_ref() {
            "prefix" => {
                prefix = value.to_string();
                "prefix"
            }
            "start-after" => {
                json_query.push(("startOffset", format!("{value}\0")));
                continue;
            }
            "delimiter" => "delimiter",
            "max-keys" => "maxResults",
            "continuation-token" => "pageToken",
            _ => continue,
        };
        json_query.push((carried, value.into_owned()));
    }
    let response = upstream
        .client
        .get(format!("{}/storage/v1/b/{bucket}/o", upstream.base))
        .query(&json_query)
        .send()
        .await?;
    if !response.status().is_success() {
        return relay(response).await;
    }
    let listed: serde_json::Value = response.json().await?;
    let xml = list_result(bucket, &prefix, &listed);
    Ok(([("content-type", "application/xml")], xml).into_response())
}

/// The JSON API's list answer written as the XML API's `ListBucketResult`.
fn list_result(bucket: &str, prefix: &str, listed: &serde_json::Value) -> String {
    let text = |v: &serde_json::Value| xml_escape(v.as_str().unwrap_or_default());
    let items = listed["items"].as_array().map_or(&[][..], Vec::as_slice);
    let prefixes = listed["prefixes"].as_array().map_or(&[][..], Vec::as_slice);
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult><Name>{}</Name>\
         <Prefix>{}</Prefix><KeyCount>{}</KeyCount>",
        xml_escape(bucket),
        xml_escape(prefix),
        items.len() + prefixes.len()
    );
    if let Some(token) = listed["nextPageToken"].as_str() {
        xml.push_str(&format!(
            "<IsTruncated>true</IsTruncated><NextContinuationToken>{}</NextContinuationToken>",
            xml_escape(token)
        ));
    }
    for item in items {
        xml.push_str(&format!(
            "<Contents><Key>{}</Key><Generation>{}</Generation><LastModified>{}</LastModified>\
             <ETag>{}</ETag><Size>{}</Size></Contents>",
            text(&item["name"]),
            text(&item["generation"]),
            text(&item["updated"]),
            text(&item["etag"]),
            text(&item["size"])
        ));
    }
    for prefix in prefixes {
        xml.push_str(&format!(
            "<CommonPrefixes><Prefix>{}</Prefix></CommonPrefixes>",
            text(prefix)
        ));
    }
    xml.push_str("</ListBucketResult>");
    xml
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `%XX` escapes of a URL path segment, decoded (object names are sent encoded).
fn percent_decode(encoded: &str) -> String {
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
