#!/bin/sh
# A certificate authority and certificates for TLS listeners and clients, made with openssl.
#
#   config/secure/make-certs.sh DIR NAME[=SAN,SAN...] ...
#
# DIR/ca.pem and DIR/ca.key: the authority (made once; an existing one is reused). For each NAME:
# DIR/NAME.pem, its private key followed by its certificate (a PEM key store, Kafka's
# ssl.keystore.location with ssl.keystore.type=PEM), and the same two parts as DIR/NAME.key and
# DIR/NAME.crt (for clients that take them apart: kcat, confluent-kafka, kafka-python). The
# certificate's subject is CN=NAME, its names DNS:NAME, DNS:localhost and IP:127.0.0.1, or the
# SANs given after '=' (DNS:broker-1,IP:10.0.0.5). Brokers and clients trust DIR/ca.pem
# (ssl.truststore.location). DAYS (365) sets how long certificates are valid, SUBJECT_SUFFIX
# adds RDNs after CN (e.g. /O=acme), KEY_PASSWORD encrypts the private keys (ssl.key.password).
set -eu

if [ $# -lt 2 ]; then
    echo "usage: $0 DIR NAME[=SAN,SAN...] ..." >&2
    exit 2
fi
dir=$1
shift
days=${DAYS:-365}
mkdir -p "$dir"
umask 077

key() {  # an EC P-256 private key: quick to make, quick to handshake with
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
}

if [ ! -f "$dir/ca.pem" ]; then
    key "$dir/ca.key"
    openssl req -x509 -new -key "$dir/ca.key" -days 3650 -subj "/CN=minikafka-ca" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out "$dir/ca.pem"
    echo "made the certificate authority $dir/ca.pem"
fi

for spec in "$@"; do
    name=${spec%%=*}
    case $spec in
        *=*) sans=${spec#*=} ;;
        *) sans="DNS:$name,DNS:localhost,IP:127.0.0.1" ;;
    esac
    key "$dir/$name.key"
    openssl req -new -key "$dir/$name.key" -subj "/CN=$name${SUBJECT_SUFFIX:-}" -out "$dir/$name.csr"
    printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n' "$sans" \
        > "$dir/$name.ext"
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
        -days "$days" -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
    if [ -n "${KEY_PASSWORD:-}" ]; then
        openssl pkcs8 -topk8 -in "$dir/$name.key" -passout env:KEY_PASSWORD -out "$dir/$name.key.enc"
        mv "$dir/$name.key.enc" "$dir/$name.key"
    fi
    cat "$dir/$name.key" "$dir/$name.crt" > "$dir/$name.pem"
    rm -f "$dir/$name.csr" "$dir/$name.ext"
    echo "made $dir/$name.pem (CN=$name, $sans, valid $days days)"
done
# Readable by the broker's user in a container; the keys stay out of anyone else's reach.
chmod 644 "$dir/ca.pem" "$dir"/*.crt
