-- The platform's own DKIM keys (docs/operations.md, "Platform mail"): password resets, invitations and TLS reports
-- are signed by the domain of SVC_NOTIFY_FROM with one key per algorithm, made once by the first process that needs
-- it and the same for every MTA node sharing this database. The private key is sealed with the master key (bound
-- to its domain and selector); the public key is not secret, so `svc doctor --platform` reads it without the key.
CREATE TABLE platform_dkim_keys (
  domain text NOT NULL,
  algorithm text NOT NULL CHECK (algorithm IN ('rsa', 'ed25519')),
  selector text NOT NULL,
  private_sealed text NOT NULL,
  public_key text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (domain, algorithm)
);
