#!/usr/bin/env python3
"""An HTTP proxy on 127.0.0.1 that hands every request to one fake, for
programs whose endpoints are hard-coded (acr-credential-provider asks IMDS
at http://169.254.169.254/ and registries at https://REGISTRY/). Such a
program, given HTTP_PROXY/HTTPS_PROXY pointing here and SSL_CERT_FILE
holding CA, connects to nothing but this port:

  - a plain request through the proxy (`GET http://169.254.169.254/...`)
    is piped as is to the fake, which reads the absolute URI's path;
  - `CONNECT HOST:443` is answered 200, the tunnel's TLS is terminated with
    CERT/KEY (issued for HOST by the test's own CA), and the decrypted
    bytes are piped to the fake, Host header intact.

Nothing is ever dialled but 127.0.0.1:FAKE_PORT. Python 3 standard library
only; prints its port on its first line.

usage: tls_proxy.py FAKE_PORT CERT.pem KEY.pem
"""
import socket
import ssl
import sys
import threading


def pipe(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(client, fake_port, context):
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 65536:
        data = client.recv(4096)
        if not data:
            client.close()
            return
        head += data
    if head.startswith(b"CONNECT "):
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        try:
            client = context.wrap_socket(client, server_side=True)
        except (ssl.SSLError, OSError):
            client.close()
            return
        head = b""
    upstream = socket.create_connection(("127.0.0.1", fake_port))
    if head:
        upstream.sendall(head)
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
    pipe(client, upstream)


def main():
    fake_port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    print(server.getsockname()[1], flush=True)
    while True:
        client, _ = server.accept()
        threading.Thread(target=serve, args=(client, fake_port, context), daemon=True).start()


if __name__ == "__main__":
    main()
