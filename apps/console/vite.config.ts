import { defineConfig } from "vite";

// Served by the bot server under /console/ (apps/bot-server/src/routes/console.ts), which ships this build
// inside its own dist/console. Preact needs no plugin: Vite's own JSX transform with Preact's runtime.
export default defineConfig({
  base: "/console/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: { outDir: "dist", emptyOutDir: true, sourcemap: true, target: "es2022" },
  server: { proxy: { "/v1": "http://127.0.0.1:8080", "/readyz": "http://127.0.0.1:8080" } },
});
