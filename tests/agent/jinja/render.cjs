// render.cjs: renders a chat template with @huggingface/jinja, the reference
// for Hearth's C renderers. usage: node render.cjs JINJA_DIR TEMPLATE CONTEXT_JSON
// CONTEXT_JSON holds {messages, tools, add_generation_prompt, ...}; the
// rendering goes to stdout, byte for byte.
const path = require("path");
const fs = require("fs");
const { Template } = require(path.resolve(process.argv[2], "node_modules/@huggingface/jinja"));
const source = fs.readFileSync(process.argv[3], "utf8");
const ctx = JSON.parse(fs.readFileSync(process.argv[4], "utf8"));
ctx.bos_token = ctx.bos_token ?? "<|begin_of_text|>";
ctx.eos_token = ctx.eos_token ?? "<|eot_id|>";
process.stdout.write(new Template(source).render(ctx));
