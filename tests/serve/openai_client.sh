#!/bin/sh
# openai_client.sh: the official OpenAI client library (npm `openai`)
# against hearth serve with Hearth's default model: chat, streaming, tools,
# JSON-schema output, errors; every answer checked against a JSON Schema
# made from the client's own TypeScript types (openai_client.mjs).
. tests/serve/node_setup.sh serve/openai_client
exec timeout 300 node "$NODE_DIR/openai_client.mjs"
