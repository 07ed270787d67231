package dev.onceguard.proxy.security;

import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import java.security.cert.Certificate;
import java.security.cert.CertificateParsingException;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import javax.naming.InvalidNameException;
import javax.naming.ldap.LdapName;
import javax.naming.ldap.Rdn;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;

/**
 * Authenticates calls to the services it intercepts (the Guard API and Deliveries; never health,
 * which probes must reach): with a token file, the call must carry
 * {@code authorization: Bearer <token>}; with allowed client names, the mTLS client certificate's
 * subject CN or one of its DNS, URI or IP subject alternative names must be among them. When both
 * are configured, both must pass. A refused call is closed with {@code UNAUTHENTICATED} before the
 * service sees it; the description says what was missing, never the token.
 *
 * <p>Threading: any thread (gRPC's).
 */
public final class ApiAuth implements ServerInterceptor {
  /** The header carrying the bearer token. */
  public static final Metadata.Key<String> AUTHORIZATION = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
  private static final String BEARER = "Bearer ";

  private final TokenFile token;
  private final Set<String> allowedClients;

  /**
   * @param token the expected token, or {@code null} for none
   * @param allowedClients client certificate names allowed; empty for no name check
   */
  public ApiAuth(TokenFile token, List<String> allowedClients) {
    this.token = token;
    this.allowedClients = Set.copyOf(allowedClients);
  }

  @Override
  public <Q, A> ServerCall.Listener<Q> interceptCall(ServerCall<Q, A> call, Metadata headers, ServerCallHandler<Q, A> next) {
    String refusal = refusal(call, headers);
    if (refusal != null) {
      call.close(Status.UNAUTHENTICATED.withDescription(refusal), new Metadata());
      return new ServerCall.Listener<>() {};
    }
    return next.startCall(call, headers);
  }

  private String refusal(ServerCall<?, ?> call, Metadata headers) {
    if (token != null) {
      String auth = headers.get(AUTHORIZATION);
      if (auth == null) {
        return "missing 'authorization: Bearer <token>' (sidecar.auth.token-file is set)";
      }
      if (!auth.regionMatches(true, 0, BEARER, 0, BEARER.length()) || !token.matches(auth.substring(BEARER.length()))) {
        return "wrong bearer token";
      }
    }
    if (!allowedClients.isEmpty()) {
      List<String> names = clientNames(call.getAttributes().get(Grpc.TRANSPORT_ATTR_SSL_SESSION));
      if (names.stream().noneMatch(allowedClients::contains)) {
        return names.isEmpty() ? "no client certificate" : "client certificate " + names + " is not in sidecar.auth.allowed-clients";
      }
    }
    return null;
  }

  /** The peer certificate's subject CN and DNS, URI and IP SANs; empty without one. Package-private for tests. */
  static List<String> clientNames(SSLSession session) {
    List<String> names = new ArrayList<>();
    if (session == null) {
      return names;
    }
    try {
      Certificate[] chain = session.getPeerCertificates();
      if (chain.length == 0 || !(chain[0] instanceof X509Certificate leaf)) {
        return names;
      }
      for (Rdn rdn : new LdapName(leaf.getSubjectX500Principal().getName()).getRdns()) {
        if (rdn.getType().equalsIgnoreCase("CN")) {
          names.add(String.valueOf(rdn.getValue()));
        }
      }
      if (leaf.getSubjectAlternativeNames() != null) {
        for (List<?> san : leaf.getSubjectAlternativeNames()) {
          int type = (Integer) san.get(0);
          if (type == 2 || type == 6 || type == 7) { // dNSName, uniformResourceIdentifier, iPAddress
            names.add(String.valueOf(san.get(1)));
          }
        }
      }
    } catch (SSLPeerUnverifiedException | InvalidNameException | CertificateParsingException e) {
      // no verified certificate, or one we cannot read: no names
    }
    return names;
  }
}
