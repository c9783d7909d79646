//! A network partition of one client: a TCP proxy on loopback between it and a server, which a
//! test can cut and heal.
//!
//! Cut, the proxy drops every open connection (a request in flight may or may not have reached
//! the server, and its answer is lost either way) and takes new ones without ever answering them,
//! as a black-holed route does, until it is healed; the client's own timeouts are what end them.
//! Healed, it drops the connections it held and forwards new ones again. The server sees nothing
//! of the cut client meanwhile.

use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// How often a held connection looks whether the partition healed.
const HELD_POLL: Duration = Duration::from_millis(50);

/// The proxy; dropping it ends every connection through it.
pub struct Partition {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: AbortHandle,
}

#[derive(Default)]
struct Shared {
    cut: AtomicBool,
    /// The tasks of the connections being forwarded.
    open: Mutex<Vec<AbortHandle>>,
}

impl Partition {
    /// A proxy to `upstream` on an ephemeral loopback port, forwarding.
    pub async fn start(upstream: SocketAddr) -> Partition {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let shared = Arc::new(Shared::default());
        let accepting = shared.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let shared = accepting.clone();
                let task = tokio::spawn(async move {
                    if shared.cut.load(Ordering::SeqCst) {
                        hold(&shared).await;
                    } else {
                        forward(client, upstream).await;
                    }
                });
                let mut open = accepting.open.lock();
                open.retain(|t| !t.is_finished());
                open.push(task.abort_handle());
            }
        })
        .abort_handle();
        Partition { addr, shared, accept }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Cuts the client off: open connections drop, new ones hang.
    pub fn cut(&self) {
        self.shared.cut.store(true, Ordering::SeqCst);
        for task in self.shared.open.lock().drain(..) {
            task.abort();
        }
    }

    /// Heals the partition: held connections drop, new ones are forwarded.
    pub fn heal(&self) {
        self.shared.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.accept.abort();
        for task in self.shared.open.lock().drain(..) {
            task.abort();
        }
    }
}

/// Keeps a connection taken during a cut unanswered until the partition heals, then drops it.
async fn hold(shared: &Shared) {
    while shared.cut.load(Ordering::SeqCst) {
        tokio::time::sleep(HELD_POLL).await;
    }
}

async fn forward(mut client: TcpStream, upstream: SocketAddr) {
    if let Ok(mut server) = TcpStream::connect(upstream).await {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_partition_should_answer_nothing_until_healed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let echo = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let upstream = echo.local_addr().expect("its address");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = echo.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    let partition = Partition::start(upstream).await;
    let round_trip = |addr| async move {
        let mut s = TcpStream::connect(addr).await.ok()?;
        s.write_all(b"ping").await.ok()?;
        let mut buf = [0u8; 4];
        tokio::time::timeout(Duration::from_millis(500), s.read_exact(&mut buf))
            .await
            .ok()?
            .ok()?;
        Some(buf)
    };
    assert_eq!(round_trip(partition.addr()).await, Some(*b"ping"), "forwarded");
    partition.cut();
    assert_eq!(round_trip(partition.addr()).await, None, "nothing answers while cut");
    partition.heal();
    assert_eq!(round_trip(partition.addr()).await, Some(*b"ping"), "forwarded again");
}
