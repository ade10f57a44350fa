// The shop's look, checked alike by the admin CLI, the API and the dashboard (services/vocabulary/
// shop-look.ts): https logos only, #rrggbb colours, and text on the colour that always meets WCAG AA.
import t from "tap";
import { brandColorProblem, contrastRatio, logoOrigin, logoUrlProblem, nameProblem, textColorOn } from "../../services/vocabulary/shop-look.ts";
import { brandStylesheet, brandStylesheetName, withImageOrigin } from "../../services/checkout/brand-style.ts";

t.test("a logo URL is https, a host, no credentials, at most 2048 characters", async (t) => {
  t.equal(logoUrlProblem("https://cdn.example/shop/logo.svg"), undefined, "SVG accepted: <img> runs no script");
  t.equal(logoUrlProblem(`https://cdn.example/${"a".repeat(2048 - 20)}`), undefined, "2048 characters");
  for (const bad of [
    "http://cdn.example/logo.png",
    "javascript:alert(1)",
    "data:image/svg+xml;base64,PHN2Zz4=",
    "//cdn.example/logo.png",
    "https://user:pw@cdn.example/logo.png",
    "https://cdn.example/a b.png",
    "https:\n//cdn.example/logo.png",
    " https://cdn.example/logo.png",
    "https://",
    `https://cdn.example/${"a".repeat(2048)}`,
  ]) t.type(logoUrlProblem(bad), "string", `refused: ${JSON.stringify(bad.slice(0, 40))}`);
  t.equal(logoOrigin("https://cdn.example:8443/x/logo.png?v=2"), "https://cdn.example:8443");
  t.equal(logoOrigin("http://cdn.example/logo.png"), undefined);
  t.equal(logoOrigin(undefined), undefined);
});

t.test("a brand colour is #rrggbb and a name 1 to 200 characters", async (t) => {
  for (const ok of ["#1a7f37", "#FFFFFF", "#000000"]) t.equal(brandColorProblem(ok), undefined, ok);
  for (const bad of ["1a7f37", "#fff", "#1a7f3", "#1a7f377", "#gggggg", "red", "#1a7f37;", ""]) t.type(brandColorProblem(bad), "string", `refused: ${bad}`);
  t.equal(nameProblem("My Shop"), undefined);
  for (const bad of ["", "   ", "x".repeat(201), "a\u0000b"]) t.type(nameProblem(bad), "string");
});

t.test("the text on any brand colour reaches WCAG AA (4.5:1): white or black, whichever contrasts more", async (t) => {
  t.equal(textColorOn("#000000"), "#ffffff");
  t.equal(textColorOn("#ffffff"), "#000000");
  t.equal(textColorOn("#1d4ed8"), "#ffffff");
  t.equal(textColorOn("#ffd700"), "#000000");
  t.ok(Math.abs(contrastRatio("#000000", "#ffffff") - 21) < 1e-9, "black on white is 21:1");
  // Every colour on a grid of 16 steps a channel (4096 colours, the worst case among them near luminance 0.18).
  let worst = 21;
  for (let r = 0; r < 256; r += 17) for (let g = 0; g < 256; g += 17) for (let b = 0; b < 256; b += 17) {
    const hex = `#${[r, g, b].map((c) => c.toString(16).padStart(2, "0")).join("")}`;
    worst = Math.min(worst, contrastRatio(hex, textColorOn(hex)));
  }
  t.ok(worst >= 4.5, `the worst contrast is ${worst.toFixed(2)}:1`);
});

t.test("the brand stylesheet is made from the colour alone, and the CSP adds the logo's origin to img-src only", async (t) => {
  t.equal(brandStylesheetName("#1A7F37"), "brand-1a7f37.css");
  const css = brandStylesheet("ffd700").toString();
  t.match(css, "background: #ffd700; color: #000000");
  const policy = "default-src 'none'; style-src 'self'; img-src 'self' data:; connect-src 'self'";
  t.equal(withImageOrigin(policy, "https://cdn.example"), "default-src 'none'; style-src 'self'; img-src 'self' data: https://cdn.example; connect-src 'self'");
  t.equal(withImageOrigin(policy, undefined), policy);
});
