//! The transport of vLLM's gRPC engine API: one HTTP/2 channel per run (tonic's, connected on
//! first use; every request a stream of it), the pre-built body framed as a `GenerateRequest`
//! with its `request_id` written in front ([`BodyCodec`]), and the `Generate` stream read
//! message by message into the [`ResponseState`] ([`exchange`]). Also the two unary calls a run
//! makes beside it: `HealthCheck` (the warm-up's connection) and `GetModelInfo`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes};
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;

use super::proto;
use super::Reading;
use crate::backend::state::ResponseState;
use crate::backend::status::Status;

/// How long opening the channel's connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The engine an endpoint names: its `http://host:port` and the run's one channel to it,
/// opened on first use (inside the runtime) and shared by every clone.
#[derive(Clone)]
pub struct Grpc(Arc<Engine>);

/// What every clone of a [`Grpc`] shares (an endpoint stays small: it is cloned per task).
struct Engine {
    uri: http::Uri,
    channel: OnceLock<Channel>,
}

impl std::fmt::Debug for Grpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grpc").field("uri", &self.0.uri).finish()
    }
}

impl Grpc {
    /// The engine at `url`: `grpc://host:port` or `http://host:port` (plain HTTP/2; the
    /// engine's port has no TLS), without a path.
    pub fn new(url: &reqwest::Url) -> Result<Grpc, String> {
        if !matches!(url.scheme(), "grpc" | "http") {
            return Err(format!(
                "--api vllm-grpc needs grpc://host:port or http://host:port (the engine port is plain HTTP/2), got {}://",
                url.scheme()
            ));
        }
        if !matches!(url.path(), "" | "/") {
            return Err(format!(
                "--api vllm-grpc: the endpoint is the engine's host:port, without a path (got {:?})",
                url.path()
            ));
        }
        let host = url
            .host_str()
            .ok_or("--api vllm-grpc: the endpoint has no host")?;
        let port = url
            .port()
            .ok_or("--api vllm-grpc: the endpoint needs its port (vllm serve --grpc --port P)")?;
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        let uri = format!("http://{host}:{port}")
            .parse()
            .map_err(|e| format!("--api vllm-grpc: {e}"))?;
        Ok(Grpc(Arc::new(Engine {
            uri,
            channel: OnceLock::new(),
        })))
    }

    /// The run's channel (must be called inside the tokio runtime: the channel's worker is a
    /// task of it).
    fn channel(&self) -> Channel {
        self.0
            .channel
            .get_or_init(|| {
                tonic::transport::Endpoint::from(self.0.uri.clone())
                    .connect_timeout(CONNECT_TIMEOUT)
                    .tcp_nodelay(true)
                    .connect_lazy()
            })
            .clone()
    }

    async fn client(&self) -> Result<tonic::client::Grpc<Channel>, (Status, String)> {
        let mut c = tonic::client::Grpc::new(self.channel());
        c.ready()
            .await
            .map_err(|e| (Status::ConnectError, format!("gRPC: {}", e)))?;
        Ok(c)
    }

    /// `HealthCheck`: the engine answers and says it is healthy (opens the channel's
    /// connection, so the first request does not pay for it).
    pub async fn health(&self) -> Result<(), String> {
        let mut c = self.client().await.map_err(|e| e.1)?;
        let r: proto::HealthCheckResponse = unary(&mut c, "HealthCheck").await?;
        if r.healthy {
            Ok(())
        } else {
            Err(format!("the engine is not healthy: {}", r.message))
        }
    }
}

/// `GetModelInfo`: the served model's name and path, its tokenizer's path on the server.
pub async fn model_info(g: &Grpc) -> Result<proto::GetModelInfoResponse, String> {
    let mut c = g.client().await.map_err(|e| e.1)?;
    unary(&mut c, "GetModelInfo").await
}

/// A unary call with an empty request.
async fn unary<T: Message + Default + Send + Sync + 'static>(
    c: &mut tonic::client::Grpc<Channel>,
    method: &str,
) -> Result<T, String> {
    let path = path(method)?;
    c.unary(
        tonic::Request::new(Bytes::new()),
        path,
        BodyCodec::<T>::default(),
    )
    .await
    .map(tonic::Response::into_inner)
    .map_err(|s| super::status_of(&s).1)
}

fn path(method: &str) -> Result<http::uri::PathAndQuery, String> {
    format!("/{}/{method}", proto::SERVICE)
        .parse()
        .map_err(|e| format!("gRPC path of {method}: {e}"))
}

/// A unique `request_id` for each request of this process (the engine refuses two running
/// requests with one id; several client processes may share an engine).
fn request_id() -> String {
    static NONCE: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nonce = NONCE.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        t ^ (u64::from(std::process::id()) << 40)
    });
    format!("rs-{nonce:016x}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Send one `Generate` request (`body` from [`super::encode_body`]) and read its stream to the
/// end into `state`; each message is taken at its arrival.
pub async fn exchange(
    g: &Grpc,
    body: Bytes,
    state: &mut ResponseState,
) -> Result<(), (Status, String)> {
    let mut c = g.client().await?;
    let req = tonic::Request::new(Framed {
        id: request_id(),
        body,
    });
    let path = path("Generate").map_err(|e| (Status::ProtocolError, e))?;
    let codec = FramedCodec::default();
    let mut stream = c
        .server_streaming(req, path, codec)
        .await
        .map_err(|s| super::status_of(&s))?
        .into_inner();
    let mut reading = Reading::default();
    loop {
        match stream.message().await {
            Ok(Some(m)) => super::on_message(state, &mut reading, m, Instant::now())
                .map_err(|e| (Status::ProtocolError, e.0))?,
            Ok(None) => break,
            Err(s) => return Err(super::status_of(&s)),
        }
    }
    super::finish(state)
}

/// A request of [`exchange`]: the id and the body built ahead of time.
struct Framed {
    id: String,
    body: Bytes,
}

/// Encodes a [`Framed`] (tag 1, the id, then the body's fields) and decodes the stream's
/// `GenerateResponse`s.
type FramedCodec = Codecs<Framed, proto::GenerateResponse>;

/// Encodes raw message bytes (an empty request) and decodes `T`.
type BodyCodec<T> = Codecs<Bytes, T>;

/// The codec of a call sending `E` and receiving `D`.
struct Codecs<E, D>(std::marker::PhantomData<fn(E) -> D>);

impl<E, D> Default for Codecs<E, D> {
    fn default() -> Self {
        Codecs(std::marker::PhantomData)
    }
}

/// Writes what is sent.
trait Wire {
    fn write(self, dst: &mut EncodeBuf<'_>);
}

impl Wire for Bytes {
    fn write(self, dst: &mut EncodeBuf<'_>) {
        dst.put(self);
    }
}

impl Wire for Framed {
    fn write(self, dst: &mut EncodeBuf<'_>) {
        prost::encoding::string::encode(1, &self.id, dst);
        dst.put(self.body);
    }
}

struct Enc<E>(std::marker::PhantomData<fn(E)>);
struct Dec<D>(std::marker::PhantomData<fn() -> D>);

impl<E: Wire> Encoder for Enc<E> {
    type Item = E;
    type Error = tonic::Status;
    fn encode(&mut self, item: E, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        item.write(dst);
        Ok(())
    }
}

impl<D: Message + Default> Decoder for Dec<D> {
    type Item = D;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<D>, tonic::Status> {
        // A message that does not decode is the server's fault: DATA_LOSS marks it for
        // `status_of` (a protocol error, not the server's own status).
        D::decode(src)
            .map(Some)
            .map_err(|e| tonic::Status::data_loss(format!("malformed message: {e}")))
    }
}

impl<E, D> Codec for Codecs<E, D>
where
    E: Wire + Send + 'static,
    D: Message + Default + Send + 'static,
{
    type Encode = E;
    type Decode = D;
    type Encoder = Enc<E>;
    type Decoder = Dec<D>;
    fn encoder(&mut self) -> Enc<E> {
        Enc(std::marker::PhantomData)
    }
    fn decoder(&mut self) -> Dec<D> {
        Dec(std::marker::PhantomData)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_and_ids() {
        let g = Grpc::new(&"grpc://127.0.0.1:50051".parse().unwrap()).unwrap();
        assert_eq!(g.0.uri.to_string(), "http://127.0.0.1:50051/");
        assert!(Grpc::new(&"http://h:1".parse().unwrap()).is_ok());
        let e = Grpc::new(&"https://h:1".parse().unwrap()).unwrap_err();
        assert!(e.contains("plain HTTP/2"), "{e}");
        assert!(Grpc::new(&"grpc://h".parse().unwrap())
            .unwrap_err()
            .contains("port"));
        assert!(Grpc::new(&"grpc://h:1/v1".parse().unwrap()).is_err());
        let (a, b) = (request_id(), request_id());
        assert_ne!(a, b);
        assert!(a.starts_with("rs-"));
    }

    #[test]
    fn the_id_written_in_front_makes_the_whole_request() {
        let mut body = Vec::new();
        super::super::encode_body(Ok(&[3, 1]), 2, (true, true), &mut body);
        let mut framed = Vec::new();
        prost::encoding::string::encode(1, &"rs-1".to_string(), &mut framed);
        framed.extend_from_slice(&body);
        let req = proto::GenerateRequest::decode(framed.as_slice()).unwrap();
        assert_eq!(req.request_id, "rs-1");
        assert!(matches!(req.input, Some(proto::Input::Tokenized(t)) if t.input_ids == [3, 1]));
    }
}
