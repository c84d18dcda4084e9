//! The TCP connection under each plain-HTTP request, and the kernel's times of its bytes
//! ([`TimedConnector`], [`ConnClock`]).
//!
//! A client that stamps a token when it gets round to reading it measures its own lateness
//! too: at 1,000 streams on two cores the reads of one burst of first tokens take milliseconds
//! (docs/performance.md, "Measured on the wire"). The kernel stamps every segment it receives
//! (`SO_TIMESTAMPING`, software receive stamps), and `recvmsg` hands the stamp over with the
//! bytes, so each read knows when its bytes arrived:
//! - a token's time is the arrival of the read that carried it: TTFT and ITL as the wire has
//!   them, whatever the client's load;
//! - the read's *receive lateness* is the time from that arrival to the client's read.
//!
//! The kernel merges segments that queue up unread and keeps the newest one's stamp, so when
//! the client reads later than the server's token interval, a read's stamp is that of its newest
//! bytes: token times are then never early, and the lateness is that of the newest bytes.
//!
//! The kernel switches its receiving stamps on a moment after the first socket of the machine
//! asks for them, so the bytes of the first milliseconds may come unstamped (the run's warm-up
//! connections ask well before the first request): such a read keeps the client's own time.
//!
//! The request's own send time is taken the same way: the moment its first byte is handed to
//! the socket (an HTTP/1.1 connection carries one request at a time, so the first write after
//! a response is the next request's).
//!
//! The stamps need `recvmsg` with a control-message buffer on the socket's own descriptor;
//! reqwest does not let a connector replace its stream type, so plain-HTTP requests go through
//! hyper's client with this connector (`super::client`). The `libc` calls are used directly:
//! `recvmsg` into the read buffer's uninitialised memory, which the safe wrappers (nix) do not
//! take.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// What the kernel said about one connection's bytes, shared by the connection (which writes
/// it) and the request on it (which reads it from the response's extensions).
#[derive(Debug, Clone, Default)]
pub struct ConnClock(Arc<Mutex<Stamps>>);

#[derive(Debug, Default)]
struct Stamps {
    /// Whether the socket delivers receive stamps (`SO_TIMESTAMPING` accepted).
    stamped: bool,
    /// The current request's first write.
    written: Option<Instant>,
    /// The latest read that brought bytes: when they arrived, and how late they were read.
    read: Option<Arrival>,
    /// Reading since the last write (the next write starts a new request).
    reading: bool,
}

/// When the bytes of one read arrived in the kernel, and how long they waited to be read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    pub at: Instant,
    pub late: Duration,
}

impl ConnClock {
    fn lock(&self) -> std::sync::MutexGuard<'_, Stamps> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// When the current request's first byte was written, if it was.
    pub fn written(&self) -> Option<Instant> {
        self.lock().written
    }

    /// The latest read's arrival (`None` before any read, or without kernel stamps).
    pub fn arrival(&self) -> Option<Arrival> {
        let s = self.lock();
        s.read.filter(|_| s.stamped)
    }

    /// Whether the kernel stamps this connection's bytes.
    pub fn stamped(&self) -> bool {
        self.lock().stamped
    }

    fn on_write(&self) {
        let mut s = self.lock();
        if s.reading || s.written.is_none() {
            s.written = Some(Instant::now());
            s.reading = false;
            s.read = None;
        }
    }

    fn on_read(&self, arrival: Option<Arrival>) {
        let mut s = self.lock();
        s.reading = true;
        if arrival.is_some() {
            s.read = arrival;
        }
    }
}

/// A TCP stream whose reads carry the kernel's receive stamps into its [`ConnClock`].
#[derive(Debug)]
pub struct TimedTcp {
    tcp: TcpStream,
    clock: ConnClock,
}

impl TimedTcp {
    /// `tcp` with receive stamps turned on when the kernel allows them.
    pub fn new(tcp: TcpStream) -> TimedTcp {
        let clock = ConnClock::default();
        clock.lock().stamped = enable_rx_stamps(tcp.as_raw_fd());
        TimedTcp { tcp, clock }
    }

    pub fn clock(&self) -> &ConnClock {
        &self.clock
    }
}

impl AsyncRead for TimedTcp {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            ready!(this.tcp.poll_read_ready(cx))?;
            let fd = this.tcp.as_raw_fd();
            // `try_io` clears the readiness when the read would block, so the loop waits
            // for the next wake-up.
            let unfilled = buf.initialize_unfilled();
            match this
                .tcp
                .try_io(Interest::READABLE, || recv_stamped(fd, unfilled))
            {
                Ok((n, stamp)) => {
                    if n > 0 {
                        this.clock.on_read(stamp.map(arrival_of));
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for TimedTcp {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.clock.on_write();
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.clock.on_write();
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

impl Connection for TimedTcp {
    fn connected(&self) -> Connected {
        let c = self.tcp.connected();
        c.extra(self.clock.clone())
    }
}

/// The arrival of bytes the kernel stamped at `stamp` (`CLOCK_REALTIME`), on the monotonic
/// clock the run's times use: now less the time since the stamp.
fn arrival_of(stamp: SystemTime) -> Arrival {
    let now = Instant::now();
    let late = SystemTime::now()
        .duration_since(stamp)
        .unwrap_or(Duration::ZERO);
    Arrival {
        at: now.checked_sub(late).unwrap_or(now),
        late,
    }
}

/// hyper's connector for plain-HTTP endpoints: a [`TimedTcp`] to the URI's host, with
/// `TCP_NODELAY` and a connect timeout (every resolved address is tried in turn).
#[derive(Debug, Clone)]
pub struct TimedConnector {
    pub connect_timeout: Duration,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<http::Uri> for TimedConnector {
    type Response = TokioIo<TimedTcp>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let timeout = self.connect_timeout;
        Box::pin(async move {
            let host = uri.host().ok_or("URL without a host")?;
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(80);
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
                .await?
                .collect();
            let mut last: Option<io::Error> = None;
            for addr in addrs {
                match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
                    Ok(Ok(tcp)) => {
                        tcp.set_nodelay(true)?;
                        return Ok(TokioIo::new(TimedTcp::new(tcp)));
                    }
                    Ok(Err(e)) => last = Some(e),
                    Err(_) => {
                        last = Some(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("connect to {addr} timed out after {timeout:?}"),
                        ))
                    }
                }
            }
            Err(last
                .unwrap_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address"))
                })
                .into())
        })
    }
}

/// Turn on software receive stamps for `fd`; false when the kernel refuses.
#[allow(unsafe_code)]
fn enable_rx_stamps(fd: i32) -> bool {
    let flags: libc::c_uint = libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE;
    // SAFETY: `flags` outlives the call and its size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            (&flags as *const libc::c_uint).cast(),
            std::mem::size_of::<libc::c_uint>() as libc::socklen_t,
        )
    };
    r == 0
}

/// One `recvmsg` into `buf`: the bytes read and the kernel's receive stamp of the newest of
/// them, when it sent one.
#[allow(unsafe_code)]
fn recv_stamped(fd: i32, buf: &mut [u8]) -> io::Result<(usize, Option<SystemTime>)> {
    // Room for one `scm_timestamping` (three timespecs) and its header, aligned for cmsghdr.
    #[repr(C, align(8))]
    struct Control([u8; 128]);
    let mut control = Control([0; 128]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: a zeroed msghdr is valid; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len();
    // SAFETY: `iov` and `control` outlive the call; the kernel writes at most their lengths.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, within
    // `msg_controllen`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPING {
                // struct scm_timestamping { struct timespec ts[3]; }: [0] is the software stamp.
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                if ts.tv_sec > 0 {
                    stamp = Some(UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Real sockets on 127.0.0.1: the kernel's stamp is the arrival, however late the read.
    #[test]
    fn reads_carry_the_kernels_arrival_and_writes_the_send_time() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            // The kernel turns receive stamps on a moment after the first socket asks (a
            // deferred switch): one socket asks first.
            let _early = TimedTcp::new(TcpStream::connect(addr).await.unwrap());
            let _ = l.accept().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            let server = tokio::spawn(async move {
                let (mut s, _) = l.accept().await.unwrap();
                let mut b = [0u8; 4];
                s.read_exact(&mut b).await.unwrap();
                s.write_all(b"first").await.unwrap();
                let sent = Instant::now();
                // Held 50 ms before the client reads it.
                (s, sent)
            });
            let mut c = TimedTcp::new(TcpStream::connect(addr).await.unwrap());
            assert!(
                c.clock().stamped(),
                "this kernel gives software receive stamps"
            );
            assert_eq!(c.clock().written(), None);
            let before = Instant::now();
            c.write_all(b"ping").await.unwrap();
            let written = c.clock().written().unwrap();
            assert!(written >= before && written <= Instant::now());
            let (mut s, sent) = server.await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            let mut b = [0u8; 5];
            c.read_exact(&mut b).await.unwrap();
            let a = c.clock().arrival().unwrap();
            // Arrived right after it was sent, read 50 ms later.
            let arrived_after = a.at.saturating_duration_since(sent);
            assert!(
                arrived_after < Duration::from_millis(20),
                "{arrived_after:?}"
            );
            assert!(a.late >= Duration::from_millis(45), "{:?}", a.late);
            // The next write after a read is a new request's send time.
            c.write_all(b"next").await.unwrap();
            assert!(c.clock().written().unwrap() > written);
            assert_eq!(c.clock().arrival(), None);
            s.write_all(b"x").await.unwrap();
            let mut b = [0u8; 1];
            c.read_exact(&mut b).await.unwrap();
            assert!(c.clock().arrival().unwrap().late < Duration::from_millis(45));
        });
    }
}
