package io.pykbatch.spark;

import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.io.Serializable;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * Whether a schema registry holds a schema id, asked by an executor that meets an id the driver
 * did not resolve when the query was planned: an id the registry does not have is a value that
 * cannot be read (null in mode PERMISSIVE, as the Python function gives it); one it has was
 * registered since, and the query must be planned again to read it. The registry's URL, its
 * Authorization header (never printed) and the PEM text of its CA file read on the driver (an
 * executor need not hold the file), as pykbatch's SchemaRegistry takes them.
 */
final class RegistryCheck implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final long MISSING_TTL_NANOS = 60_000_000_000L;  // pykbatch.values.registry.MISSING_TTL
    // url#id -> expiry of a "not there" answer (nanoTime); Long.MAX_VALUE: there
    private static final Map<String, Long> ANSWERS = new ConcurrentHashMap<>();

    private final String url;
    private final String authorization;  // a secret: no toString, never in a message
    private final String caPem;
    private final boolean clientCertificate;
    private final long timeoutMs;
    private transient HttpClient client;

    RegistryCheck(String url, String authorization, String caPem, boolean clientCertificate, long timeoutMs) {
        this.url = url;
        this.authorization = authorization;
        this.caPem = caPem;
        this.clientCertificate = clientCertificate;
        this.timeoutMs = timeoutMs;
    }

    String url() {
        return url;
    }

    /** Whether the registry has schema `id` (answers kept: "there" for good, "not there" 60 s). */
    boolean has(long id) {
        String key = url + "#" + id;
        Long known = ANSWERS.get(key);
        if (known != null && (known == Long.MAX_VALUE || System.nanoTime() < known)) {
            return known == Long.MAX_VALUE;
        }
        if (clientCertificate) {
            throw new IllegalStateException("kbatch_from_confluent: schema id " + id + " was not resolved when the "
                + "query was planned, and the JVM path does not present client certificates to ask the registry at "
                + url + " about it: plan the query again, or use the Python path (register(spark, jvm=False))");
        }
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url + "/schemas/ids/" + id))
            .timeout(Duration.ofMillis(timeoutMs)).header("Accept", "application/vnd.schemaregistry.v1+json").GET();
        if (authorization != null) {
            request.header("Authorization", authorization);
        }
        int status;
        try {
            status = client().send(request.build(), HttpResponse.BodyHandlers.discarding()).statusCode();
        } catch (Exception e) {
            throw new IllegalStateException("kbatch_from_confluent: asking the registry at " + url + " about schema id "
                + id + " failed: " + e, e);
        }
        if (status != 200 && status != 404) {
            throw new IllegalStateException("kbatch_from_confluent: the registry at " + url + " answered HTTP " + status
                + " about schema id " + id);
        }
        ANSWERS.put(key, status == 200 ? Long.MAX_VALUE : System.nanoTime() + MISSING_TTL_NANOS);
        return status == 200;
    }

    private HttpClient client() throws Exception {
        if (client == null) {
            HttpClient.Builder b = HttpClient.newBuilder().connectTimeout(Duration.ofMillis(timeoutMs));
            if (caPem != null) {
                b.sslContext(trusting(caPem));
            }
            client = b.build();
        }
        return client;
    }

    /** A TLS context trusting the certificates of PEM text (ssl.ca.location's). */
    private static SSLContext trusting(String pem) throws Exception {
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        try (InputStream in = new ByteArrayInputStream(pem.getBytes(StandardCharsets.US_ASCII))) {
            int n = 0;
            for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                store.setCertificateEntry("ca" + n++, c);
            }
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(store);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(null, tmf.getTrustManagers(), null);
        return context;
    }
}
