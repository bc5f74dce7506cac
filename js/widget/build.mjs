// The widget bundle: js/widget/index.js as one minified ESM file, its stylesheet inlined as
// minified text (esbuild's text loader would keep the CSS as written: 5 KB more). Arguments
// such as --log-level=warning are passed on (scripts/setup gives it).
import { build, transform } from "esbuild";
import { readFile } from "node:fs/promises";

const logLevel = process.argv.find((a) => a.startsWith("--log-level="))?.split("=")[1] ?? "info";

const minifiedCss = {
  name: "minified-css-text",
  setup(b) {
    b.onLoad({ filter: /\.css$/ }, async (args) => {
      const { code } = await transform(await readFile(args.path, "utf8"), { loader: "css", minify: true });
      return { contents: code, loader: "text" };
    });
  },
};

await build({
  entryPoints: ["js/widget/index.js"],
  bundle: true,
  format: "esm",
  minify: true,
  outfile: "syft_lab/widget/static/widget.js",
  plugins: [minifiedCss],
  logLevel,
});
