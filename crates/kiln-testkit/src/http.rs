//! A loopback HTTP/1.1 server for the fakes (GitHub, LM endpoint, Hugging Face Hub).
//!
//! The protocol work is hyper's, so clients meet real HTTP: keep-alive, chunked bodies,
//! `Content-Length`, closed connections. A fake only maps a [`Request`] to a [`Reply`]. The server
//! runs on its own thread with its own runtime, so it answers whether the test that owns it is
//! synchronous or asynchronous, and it stops when the [`Server`] is dropped.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

use crate::TestkitError;

/// One request as the fake sees it.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path without the query (`/repos/o/r`).
    pub path: String,
    /// The raw query string, without `?` (empty when there is none).
    pub query: String,
    /// Headers, names lowercased; a repeated header keeps its last value.
    pub headers: BTreeMap<String, String>,
    /// The whole body.
    pub body: Bytes,
}

impl Request {
    /// A header value by lowercase name.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The decoded value of one query parameter.
    #[must_use]
    pub fn query_param(&self, name: &str) -> Option<String> {
        self.query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key) == name).then(|| percent_decode(value))
        })
    }
}

/// What the fake answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A response.
    Response {
        /// Status code.
        status: u16,
        /// Headers in order (a name may repeat).
        headers: Vec<(String, String)>,
        /// Body bytes.
        body: Bytes,
        /// Wait this long before answering (a slow server).
        delay: Duration,
    },
    /// Close the connection without answering (a dropped connection).
    Drop,
    /// A response whose headers come at once (with the body's length) and whose body then
    /// comes one byte per `every`: a server that drips.
    Drip {
        /// Status code.
        status: u16,
        /// Headers in order.
        headers: Vec<(String, String)>,
        /// Body bytes.
        body: Bytes,
        /// Wait before each byte.
        every: Duration,
    },
    /// A response whose headers come at once and whose body, `head`, then `fill_len` copies of
    /// `fill`, then `tail`, is made in chunks as the client reads it: an answer of any size
    /// without the memory to hold it. With `announced`, the length goes out as `Content-Length`;
    /// without, the body is chunked and the client learns its size only by reading it.
    Stream {
        /// Status code.
        status: u16,
        /// Headers in order.
        headers: Vec<(String, String)>,
        /// The body's first bytes.
        head: Bytes,
        /// The byte repeated after them.
        fill: u8,
        /// How many times.
        fill_len: usize,
        /// The body's last bytes.
        tail: Bytes,
        /// Whether the length is sent as `Content-Length`.
        announced: bool,
    },
}

impl Reply {
    /// A JSON response.
    #[must_use]
    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        Self::Response {
            status,
            headers: vec![(
                "content-type".into(),
                "application/json; charset=utf-8".into(),
            )],
            body: Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
            delay: Duration::ZERO,
        }
    }

    /// A response with a body and no headers of its own.
    #[must_use]
    pub fn bytes(status: u16, body: impl Into<Bytes>) -> Self {
        Self::Response {
            status,
            headers: Vec::new(),
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// Adds a header (responses and streams).
    #[must_use]
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        if let Self::Response { headers, .. } | Self::Stream { headers, .. } = &mut self {
            headers.push((name.to_ascii_lowercase(), value.into()));
        }
        self
    }

    /// Answers only after `delay` (responses only).
    #[must_use]
    pub fn delayed(mut self, by: Duration) -> Self {
        if let Self::Response { delay, .. } = &mut self {
            *delay = by;
        }
        self
    }

    /// The status code, or `None` for a dropped connection.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Response { status, .. }
            | Self::Drip { status, .. }
            | Self::Stream { status, .. } => Some(*status),
            Self::Drop => None,
        }
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = Reply> + Send>>;
type Body = http_body_util::combinators::BoxBody<Bytes, Dropped>;
type Answer = Pin<Box<dyn Future<Output = Result<hyper::Response<Body>, Dropped>> + Send>>;

/// A body that yields one byte per `every` ([`Reply::Drip`]).
struct DripBody {
    body: Bytes,
    every: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl hyper::body::Body for DripBody {
    type Data = Bytes;
    type Error = Dropped;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Dropped>>> {
        if self.body.is_empty() {
            return std::task::Poll::Ready(None);
        }
        if self.sleep.as_mut().poll(cx).is_pending() {
            return std::task::Poll::Pending;
        }
        let next = tokio::time::Instant::now() + self.every;
        self.sleep.as_mut().reset(next);
        let byte = self.body.split_to(1);
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(byte))))
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.body.len() as u64)
    }
}

/// Bytes per chunk of a [`Reply::Stream`] body.
const STREAM_CHUNK: usize = 64 << 10;

/// The body of a [`Reply::Stream`]: its head, its fill chunk by chunk, its tail.
struct StreamBody {
    head: Bytes,
    /// One chunk of fill bytes, sliced for the last, shorter chunk.
    chunk: Bytes,
    fill_left: usize,
    tail: Bytes,
    announced: bool,
}

impl hyper::body::Body for StreamBody {
    type Data = Bytes;
    type Error = Dropped;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Dropped>>> {
        let data = if !self.head.is_empty() {
            std::mem::take(&mut self.head)
        } else if self.fill_left > 0 {
            let n = self.fill_left.min(self.chunk.len());
            self.fill_left -= n;
            self.chunk.slice(..n)
        } else if !self.tail.is_empty() {
            std::mem::take(&mut self.tail)
        } else {
            return std::task::Poll::Ready(None);
        };
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.head.is_empty() && self.fill_left == 0 && self.tail.is_empty()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        if self.announced {
            hyper::body::SizeHint::with_exact(
                (self.head.len() + self.fill_left + self.tail.len()) as u64,
            )
        } else {
            // An unknown length: hyper sends the body chunked, without `Content-Length`.
            hyper::body::SizeHint::default()
        }
    }
}

/// A response with these parts.
fn response(status: u16, headers: Vec<(String, String)>, body: Body) -> hyper::Response<Body> {
    let mut response = hyper::Response::new(body);
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::OK);
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(name.as_bytes()),
            hyper::header::HeaderValue::from_str(&value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// What a fake implements: every request becomes a reply.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request. `base_url` is the server's own address (`http://127.0.0.1:PORT`),
    /// for the absolute URLs some APIs put in headers and bodies.
    fn handle(&self, request: Request, base_url: &str) -> Reply;
}

impl<F> Handler for F
where
    F: Fn(Request, &str) -> Reply + Send + Sync + 'static,
{
    fn handle(&self, request: Request, base_url: &str) -> Reply {
        self(request, base_url)
    }
}

/// A running server; dropping it stops the server.
pub struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Starts a server on `127.0.0.1` (an ephemeral port) that answers with `handler`.
    ///
    /// # Errors
    /// When the thread, the runtime or the socket cannot be set up.
    pub fn start(handler: impl Handler) -> Result<Self, TestkitError> {
        Self::start_on(handler, 0)
    }

    /// [`Server::start`] on a chosen port (0 = any).
    ///
    /// # Errors
    /// When the thread, the runtime or the socket cannot be set up.
    pub fn start_on(handler: impl Handler, port: u16) -> Result<Self, TestkitError> {
        let io = |source: std::io::Error| TestkitError::Io {
            path: format!("127.0.0.1:{port}").into(),
            source,
        };
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).map_err(io)?;
        listener.set_nonblocking(true).map_err(io)?;
        let addr = listener.local_addr().map_err(io)?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(io)?;
        let handler: Arc<dyn Handler> = Arc::new(handler);
        let base_url = format!("http://{addr}");
        let thread = std::thread::Builder::new()
            .name(format!("kiln-fake-{}", addr.port()))
            .spawn(move || runtime.block_on(serve(listener, handler, base_url, stopped)))
            .map_err(io)?;
        Ok(Self {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    handler: Arc<dyn Handler>,
    base_url: String,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let base_url: Arc<str> = base_url.into();
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut stopped => break,
        };
        let Ok((stream, _)) = accepted else {
            continue;
        };
        let handler = Arc::clone(&handler);
        let base_url = Arc::clone(&base_url);
        connections.spawn(async move {
            let service = service_fn(move |request: hyper::Request<Incoming>| {
                let handler = Arc::clone(&handler);
                let base_url = Arc::clone(&base_url);
                answer(request, handler, base_url)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
    connections.abort_all();
}

/// Error type of a dropped connection: hyper closes the connection when the service fails.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by the fake")
    }
}

impl std::error::Error for Dropped {}

fn answer(
    request: hyper::Request<Incoming>,
    handler: Arc<dyn Handler>,
    base_url: Arc<str>,
) -> Answer {
    Box::pin(async move {
        let (parts, body) = request.into_parts();
        let body = body.collect().await.map_err(|_| Dropped)?.to_bytes();
        let headers = parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let request = Request {
            method: parts.method.as_str().to_string(),
            path: parts.uri.path().to_string(),
            query: parts.uri.query().unwrap_or_default().to_string(),
            headers,
            body,
        };
        // The handler may be slow (a large synthetic answer); keep it off the reactor threads.
        let reply: BoxFuture = Box::pin(async move {
            let base = base_url.to_string();
            tokio::task::spawn_blocking(move || handler.handle(request, &base))
                .await
                .unwrap_or(Reply::Drop)
        });
        match reply.await {
            Reply::Drop => Err(Dropped),
            Reply::Response {
                status,
                headers,
                body,
                delay,
            } => {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let body = Full::new(body).map_err(|never| match never {}).boxed();
                Ok(response(status, headers, body))
            }
            Reply::Drip {
                status,
                headers,
                body,
                every,
            } => {
                let body = DripBody {
                    body,
                    every,
                    sleep: Box::pin(tokio::time::sleep(every)),
                };
                Ok(response(status, headers, body.boxed()))
            }
            Reply::Stream {
                status,
                headers,
                head,
                fill,
                fill_len,
                tail,
                announced,
            } => {
                let body = StreamBody {
                    head,
                    chunk: Bytes::from(vec![fill; STREAM_CHUNK.min(fill_len)]),
                    fill_left: fill_len,
                    tail,
                    announced,
                };
                Ok(response(status, headers, body.boxed()))
            }
        }
    })
}

/// Decodes `%XX` escapes and `+` (as a space, the form encoding of query strings).
#[must_use]
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 3 <= bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_decode() {
        assert_eq!(percent_decode("a%20b+c%2Fd"), "a b c/d");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        let request = Request {
            method: "GET".into(),
            path: "/x".into(),
            query: "q=repo%3Ao%2Fr&per_page=100".into(),
            headers: BTreeMap::new(),
            body: Bytes::new(),
        };
        assert_eq!(request.query_param("q").as_deref(), Some("repo:o/r"));
        assert_eq!(request.query_param("per_page").as_deref(), Some("100"));
        assert_eq!(request.query_param("page"), None);
    }

    fn raw_exchange(server: &Server, request: &str) -> String {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(server.addr()).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = stream.read_to_string(&mut out);
        out
    }

    #[test]
    fn a_server_answers_real_http_and_can_drop_connections() {
        let server = Server::start(|request: Request, base: &str| {
            if request.path == "/drop" {
                return Reply::Drop;
            }
            Reply::json(
                201,
                &serde_json::json!({"path": request.path, "a": request.query_param("a"), "base": base, "body": String::from_utf8_lossy(&request.body)}),
            )
            .with_header("ETag", "\"x\"")
        })
        .unwrap();
        let out = raw_exchange(
            &server,
            "POST /p?a=1%202 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
        );
        assert!(out.starts_with("HTTP/1.1 201 Created\r\n"), "{out}");
        assert!(out.contains("etag: \"x\""), "{out}");
        let body = out.split("\r\n\r\n").nth(1).unwrap_or_default();
        let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        assert_eq!(value["path"], "/p");
        assert_eq!(value["a"], "1 2");
        assert_eq!(value["body"], "abc");
        assert_eq!(value["base"], server.url());
        let dropped = raw_exchange(&server, "GET /drop HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(dropped, "", "a dropped connection sends nothing");
    }

    #[test]
    fn streamed_bodies_come_with_or_without_their_length() {
        let server = Server::start(|request: Request, _: &str| Reply::Stream {
            status: 200,
            headers: Vec::new(),
            head: Bytes::from_static(b"<"),
            fill: b'x',
            fill_len: STREAM_CHUNK * 2 + 5,
            tail: Bytes::from_static(b">"),
            announced: request.path == "/announced",
        })
        .unwrap();
        let expected = format!("<{}>", "x".repeat(STREAM_CHUNK * 2 + 5));
        let announced = raw_exchange(
            &server,
            "GET /announced HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        let (head, body) = announced.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("content-length: {}", expected.len())),
            "{head}"
        );
        assert_eq!(body, expected);
        let chunked = raw_exchange(
            &server,
            "GET /chunked HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        let (head, body) = chunked.split_once("\r\n\r\n").unwrap();
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        assert!(!head.contains("content-length"), "{head}");
        // The chunks, each `<hex length>\r\n<data>\r\n`, up to the empty one.
        let mut rest = body;
        let mut joined = String::new();
        loop {
            let (length, after) = rest.split_once("\r\n").unwrap();
            let length = usize::from_str_radix(length, 16).unwrap();
            if length == 0 {
                break;
            }
            joined.push_str(&after[..length]);
            rest = &after[length + 2..];
        }
        assert_eq!(joined, expected);
    }
}
