//! A TCP proxy between a daemon and Postgres that a test can freeze: bytes stop flowing in
//! both directions and new connections hang, like a network partition (no reset, no error,
//! just silence). Thawing resumes every connection where it stopped. It can also go silent
//! on the connections open now only, for good, while new ones work: a half-open connection
//! (a peer that vanished without a FIN, a NAT entry dropped).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A running proxy; stops (dropping every connection) when dropped.
#[derive(Debug)]
pub struct PgProxy {
    /// Loopback port the proxy listens on.
    pub port: u16,
    state: watch::Sender<Traffic>,
    next_id: Arc<AtomicU64>,
    stop: CancellationToken,
}

/// What may flow: nothing while `frozen`; never on connections numbered below `cut_before`.
#[derive(Debug, Clone, Copy, Default)]
struct Traffic {
    frozen: bool,
    cut_before: u64,
}

impl PgProxy {
    /// Starts forwarding `127.0.0.1:<port>` to `upstream` on the current tokio runtime.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (state, _) = watch::channel(Traffic::default());
        let stop = CancellationToken::new();
        let proxy = Self {
            port,
            state,
            next_id: Arc::new(AtomicU64::new(0)),
            stop: stop.clone(),
        };
        let state_rx = proxy.state.subscribe();
        let next_id = Arc::clone(&proxy.next_id);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((client, _)) = accepted else { continue };
                let gate = Gate {
                    id: next_id.fetch_add(1, Ordering::SeqCst),
                    state: state_rx.clone(),
                };
                let stop = stop.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        () = stop.cancelled() => {}
                        () = serve(client, upstream, gate) => {}
                    }
                });
            }
        });
        Ok(proxy)
    }

    /// A proxy in front of the server `database_url` names; returns it and the URL that
    /// reaches the same database through it.
    pub async fn in_front_of(database_url: &str) -> anyhow::Result<(Self, String)> {
        let parsed = url::Url::parse(database_url)?;
        let host = parsed
            .host_str()
            .ok_or_else(|| anyhow::anyhow!("{database_url} names no host"))?;
        let upstream = tokio::net::lookup_host((host, parsed.port().unwrap_or(5432)))
            .await?
            .next()
            .ok_or_else(|| anyhow::anyhow!("{host} resolves to no address"))?;
        let proxy = Self::start(upstream).await?;
        let url = proxy.url_for(database_url)?;
        Ok((proxy, url))
    }

    /// `url` (a postgres:// URL) with its host and port replaced by the proxy's.
    pub fn url_for(&self, url: &str) -> anyhow::Result<String> {
        let mut parsed = url::Url::parse(url)?;
        parsed
            .set_host(Some("127.0.0.1"))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        parsed
            .set_port(Some(self.port))
            .map_err(|()| anyhow::anyhow!("cannot set a port on {url}"))?;
        Ok(parsed.to_string())
    }

    /// Stops all traffic (existing and new connections) until [`PgProxy::thaw`].
    pub fn freeze(&self) {
        self.state.send_modify(|t| t.frozen = true);
    }

    pub fn thaw(&self) {
        self.state.send_modify(|t| t.frozen = false);
    }

    /// Silences every connection open now, for good; later connections work.
    pub fn cut_existing(&self) {
        let next = self.next_id.load(Ordering::SeqCst);
        self.state.send_modify(|t| t.cut_before = next);
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// One connection's view of the proxy state.
#[derive(Debug, Clone)]
struct Gate {
    id: u64,
    state: watch::Receiver<Traffic>,
}

impl Gate {
    /// Returns once bytes may flow on this connection (never, once it was cut).
    async fn open(&mut self) {
        let id = self.id;
        // An error means the proxy is gone; the connection task is cancelled right after.
        let _ = self
            .state
            .wait_for(|t| !t.frozen && id >= t.cut_before)
            .await;
    }
}

async fn serve(client: TcpStream, upstream: SocketAddr, mut gate: Gate) {
    gate.open().await;
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::select! {
        () = pump(client_read, server_write, gate.clone()) => {}
        () = pump(server_read, client_write, gate) => {}
    }
}

/// Copies bytes one way, holding each chunk while the gate is shut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut gate: Gate,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        gate.open().await;
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        gate.open().await;
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
