//! A stream that tells HTTP/2 to copy small frames instead of chaining them.
//!
//! h2 copies a DATA frame's payload into its write buffer only below a threshold: 256
//! bytes when the stream says it writes vectored, 1 KiB otherwise. A larger payload is
//! chained and must be flushed on its own, one `writev` (and one TLS record) per
//! answer; copied payloads of many streams leave in one write. A labeled answer (JSON
//! Patch in base64) is 0.5–1 KiB, an unchanged one under 256 bytes, so with the TLS
//! stream's vectored writes the labeled path paid a system call per review that the
//! unchanged path shared among a dozen (docs/benchmarks.md, "Issue 18"). rustls
//! encrypts into its own buffer either way, so vectored writes gain nothing here.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `inner` with every write a plain `poll_write`.
#[derive(Debug)]
pub(super) struct CopyingWrites<S>(pub(super) S);

impl<S> CopyingWrites<S> {
    pub(super) fn get_ref(&self) -> &S {
        &self.0
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for CopyingWrites<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for CopyingWrites<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::CopyingWrites;

    #[tokio::test]
    async fn forwards_reads_and_writes_and_says_it_does_not_write_vectored() {
        let (client, server) = tokio::io::duplex(64);
        let mut client = CopyingWrites(client);
        assert!(!tokio::io::AsyncWrite::is_write_vectored(&client));
        let mut server = CopyingWrites(server);
        client.write_all(b"answer").await.expect("write");
        client.flush().await.expect("flush");
        let mut got = [0u8; 6];
        server.read_exact(&mut got).await.expect("read");
        assert_eq!(&got, b"answer");
        client.shutdown().await.expect("shutdown");
        assert_eq!(server.read(&mut got).await.expect("read at the end"), 0);
    }
}
