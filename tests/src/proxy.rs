//! A TCP proxy between a daemon and Postgres that a test can freeze: bytes stop flowing in
//! both directions and new connections hang, like a network partition (no reset, no error,
//! just silence). Thawing resumes every connection where it stopped.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A running proxy; stops (dropping every connection) when dropped.
#[derive(Debug)]
pub struct PgProxy {
    /// Loopback port the proxy listens on.
    pub port: u16,
    frozen: watch::Sender<bool>,
    stop: CancellationToken,
}

impl PgProxy {
    /// Starts forwarding `127.0.0.1:<port>` to `upstream` on the current tokio runtime.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (frozen, _) = watch::channel(false);
        let stop = CancellationToken::new();
        let proxy = Self {
            port,
            frozen,
            stop: stop.clone(),
        };
        let frozen_rx = proxy.frozen.subscribe();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((client, _)) = accepted else { continue };
                let frozen = frozen_rx.clone();
                let stop = stop.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        () = stop.cancelled() => {}
                        () = serve(client, upstream, frozen) => {}
                    }
                });
            }
        });
        Ok(proxy)
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
        self.frozen.send_replace(true);
    }

    pub fn thaw(&self) {
        self.frozen.send_replace(false);
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn wait_thawed(frozen: &mut watch::Receiver<bool>) {
    // An error means the proxy is gone; the connection task is cancelled right after.
    let _ = frozen.wait_for(|f| !*f).await;
}

async fn serve(client: TcpStream, upstream: SocketAddr, mut frozen: watch::Receiver<bool>) {
    wait_thawed(&mut frozen).await;
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::select! {
        () = pump(client_read, server_write, frozen.clone()) => {}
        () = pump(server_read, client_write, frozen) => {}
    }
}

/// Copies bytes one way, holding each chunk while the proxy is frozen.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        wait_thawed(&mut frozen).await;
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        wait_thawed(&mut frozen).await;
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
