/** A browser-like HTTP client of the dashboard for tests: keeps its cookies, reads a page's CSRF token, sends forms. */

export interface PageResponse {
  status: number;
  headers: Headers;
  body: string;
}

/** `headers` go with every request (an X-Forwarded-For, to be another address behind a trusted proxy). */
export function dashboardClient(base: string, prefix = "/dashboard", extraHeaders: Record<string, string> = {}) {
  const jar = new Map<string, string>();
  const client = {
    /** The last session token this client held (kept after sign-out, to try it again). */
    lastSession: undefined as string | undefined,
    session(): string | undefined {
      return jar.get("dashboard_session");
    },
    async request(method: string, path: string, o: { form?: URLSearchParams; session?: string } = {}): Promise<PageResponse> {
      const cookies = new Map(jar);
      if (o.session !== undefined) cookies.set("dashboard_session", o.session);
      const headers: Record<string, string> = { ...extraHeaders };
      if (cookies.size > 0) headers.cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join("; ");
      if (o.form) headers["content-type"] = "application/x-www-form-urlencoded";
      const res = await fetch(base + path, { method, headers, body: o.form?.toString(), redirect: "manual" });
      for (const line of res.headers.getSetCookie()) {
        const [pair = "", ...attributes] = line.split(";");
        const i = pair.indexOf("=");
        const name = pair.slice(0, i).trim();
        const value = pair.slice(i + 1).trim();
        if (attributes.some((a) => /^\s*Max-Age=0$/i.test(a)) || value === "") jar.delete(name);
        else jar.set(name, value);
        if (name === "dashboard_session" && value !== "") client.lastSession = value;
      }
      return { status: res.status, headers: res.headers, body: await res.text() };
    },
    get(path: string, o: { session?: string } = {}) {
      return client.request("GET", path, o);
    },
    /** The CSRF token of a page's forms. */
    async csrf(page = `${prefix}/payments`): Promise<string> {
      const res = await client.get(page);
      const token = /name="csrf" value="([^"]+)"/.exec(res.body)?.[1];
      if (!token) throw new Error(`no CSRF token on ${page} (${res.status})`);
      return token;
    },
    /** Posts a form; with `csrf` (default) the token read from a page first. */
    async post(path: string, fields: Record<string, string | string[]>, o: { csrf?: boolean; from?: string } = {}): Promise<PageResponse> {
      const form = new URLSearchParams();
      if (o.csrf !== false) form.set("csrf", await client.csrf(o.from));
      for (const [name, value] of Object.entries(fields)) for (const v of [value].flat()) form.append(name, v);
      return client.request("POST", path, { form });
    },
    signIn(key: string) {
      return client.post(`${prefix}/sign-in`, { api_key: key }, { from: `${prefix}/sign-in` });
    },
    exchange(token: string) {
      return client.post(`${prefix}/link`, { token }, { from: `${prefix}/link` });
    },
  };
  return client;
}
