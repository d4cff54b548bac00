// `svc api <METHOD> <path> [json-body]`: one signed request to the HTTP API with a credential from the
// environment (docs/development.md): a project API key or account token (SVC_API_KEY_ID and
// SVC_API_KEY_SECRET, signed as docs/api.md §5.1-§5.2 say, by the SDK's own signer) or the platform key
// (SVC_PLATFORM_ADMIN_KEY, §5.3). Prints the JSON answer pretty; exit 0 for 2xx, 1 otherwise, 2 bad usage.
import { adminHeaders, signHeaders } from '@svc-mail/sdk';

const usage = `usage: svc api <METHOD> <path> [json-body]
  e.g. svc api GET /v1/services/whoami
       svc api POST /v1/services/sendEmail '{"from":"hi@dev.test","to":"you@example.com","subject":"Hi","text":"Hello"}'
  credential: SVC_API_KEY_ID and SVC_API_KEY_SECRET, or SVC_PLATFORM_ADMIN_KEY
  server: SVC_API_URL (default http://127.0.0.1:<SVC_HTTP_PORT, 8080>)`;

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

export async function api(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [rawMethod, target, body, ...extra] = args;
  const method = rawMethod?.toUpperCase();
  if (!method || !target || extra.length || !METHODS.includes(method) || !target.startsWith('/')) {
    console.error(usage);
    return 2;
  }
  if (body !== undefined) {
    try {
      JSON.parse(body);
    } catch (err) {
      console.error(`svc api: the body is not JSON: ${err instanceof Error ? err.message : String(err)}`);
      return 2;
    }
  }
  const port = env.SVC_HTTP_PORT?.trim() || '8080';
  if (!/^\d{1,5}$/.test(port)) {
    console.error(`svc api: SVC_HTTP_PORT must be a TCP port (got ${JSON.stringify(port)})`);
    return 2;
  }
  const base = (env.SVC_API_URL?.trim() || `http://127.0.0.1:${port}`).replace(/\/+$/, '');
  const raw = body ?? '';
  const headers: Record<string, string> = raw ? { 'content-type': 'application/json' } : {};
  const keyId = env.SVC_API_KEY_ID?.trim();
  const secret = env.SVC_API_KEY_SECRET?.trim();
  const adminKey = env.SVC_PLATFORM_ADMIN_KEY?.trim();
  if (keyId && secret) Object.assign(headers, await signHeaders({ method, target, body: raw, keyId, secret }));
  else if (adminKey) Object.assign(headers, adminHeaders(adminKey));
  else {
    console.error('svc api: set SVC_API_KEY_ID and SVC_API_KEY_SECRET, or SVC_PLATFORM_ADMIN_KEY');
    return 2;
  }
  let res: Response;
  try {
    res = await fetch(base + target, { method, headers, body: raw || undefined });
  } catch (err) {
    const cause = (err as { cause?: { message?: string } }).cause?.message;
    console.error(`svc api: ${base} did not answer: ${cause ?? (err instanceof Error ? err.message : String(err))}`);
    return 1;
  }
  const text = await res.text();
  let printed = text;
  try {
    if (text) printed = JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    // Not JSON (a proxy's error page): printed as it came.
  }
  if (printed) console.log(printed);
  else console.log(`(HTTP ${res.status}, no body)`);
  return res.ok ? 0 : 1;
}
