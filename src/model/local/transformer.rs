//! The decoder forward pass for llama-shaped GGUF models (Llama, SmolLM, Mistral-style and
//! Qwen2), with a key/value cache that permit owns.
//!
//! Why not `candle_transformers::models::quantized_llama`: its cache is private and only grows,
//! and its forward pass returns the logits of the last position only. Exact option scoring needs
//! the logits of every position of an option's continuation in one pass, and prefix reuse needs
//! a cache that can be cut back to the longest prefix it shares with the next prompt. The layer
//! arithmetic itself is candle's (`QMatMul`, `rms_norm`, `rope`, `softmax`); only the wiring is
//! ours, and a test checks it against greedy output of the reference model.
//!
//! On failure (a missing tensor, a shape that does not fit, a prompt longer than the context)
//! it returns an error; it never returns made-up logits.

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QMatMul};
use candle_core::{D, DType, Device, Module, Tensor};

use super::LoadError;

/// `auto` expands weights to f32 up to this size (about 500M parameters).
pub const AUTO_F32_LIMIT_BYTES: u64 = 2 << 30;

/// Architectures whose GGUF tensors follow the llama layout this forward pass implements.
pub const SUPPORTED_ARCHITECTURES: &[&str] = &["llama", "qwen2"];

/// The shape of the network, read from the GGUF metadata.
#[derive(Clone, Debug)]
pub struct Shape {
    pub architecture: String,
    pub layers: usize,
    pub embedding: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub norm_eps: f32,
    pub rope_base: f32,
    /// NEOX rotary layout (Qwen2) rather than interleaved pairs (Llama).
    pub rope_neox: bool,
    pub context: usize,
    pub vocab: usize,
}

impl Shape {
    /// Bytes of key/value cache one token takes (f32 keys and values in every layer).
    pub fn kv_bytes_per_token(&self) -> usize {
        self.layers * 2 * self.kv_heads * self.head_dim * 4
    }
}

/// Cached keys and values of a token sequence, per layer `(1, kv_heads, len, head_dim)`.
#[derive(Clone, Debug, Default)]
pub struct KvCache {
    layers: Vec<(Tensor, Tensor)>,
    len: usize,
}

impl KvCache {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[cfg(test)]
    pub(crate) fn from_layers(layers: Vec<(Tensor, Tensor)>, len: usize) -> Self {
        KvCache { layers, len }
    }

    /// The cache of the first `len` tokens. Shares storage with `self` (a view, no copy).
    pub fn truncated(&self, len: usize) -> candle_core::Result<KvCache> {
        if len >= self.len {
            return Ok(self.clone());
        }
        if len == 0 {
            return Ok(KvCache::default());
        }
        let layers = self
            .layers
            .iter()
            .map(|(keys, values)| Ok((keys.narrow(2, 0, len)?, values.narrow(2, 0, len)?)))
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(KvCache { layers, len })
    }
}

/// Which positions' logits a forward pass returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Only the last position: prefill and greedy steps.
    Last,
    /// Every fed position: teacher-forced scoring of a continuation.
    All,
}

struct Layer {
    attention_norm: Tensor,
    query: QMatMul,
    key: QMatMul,
    value: QMatMul,
    query_bias: Option<Tensor>,
    key_bias: Option<Tensor>,
    value_bias: Option<Tensor>,
    attention_output: QMatMul,
    ffn_norm: Tensor,
    gate: QMatMul,
    up: QMatMul,
    down: QMatMul,
}

pub struct Transformer {
    shape: Shape,
    embedding: Tensor,
    layers: Vec<Layer>,
    final_norm: Tensor,
    output: QMatMul,
    cos: Tensor,
    sin: Tensor,
    device: Device,
    f32_weights: bool,
}

fn metadata<'a>(content: &'a Content, key: &str) -> Result<&'a Value, LoadError> {
    content.metadata.get(key).ok_or_else(|| LoadError::Metadata(format!("`{key}` is missing")))
}

fn metadata_usize(content: &Content, key: &str) -> Result<usize, LoadError> {
    let value = metadata(content, key)?;
    let number = match value {
        Value::U8(n) => u64::from(*n),
        Value::U16(n) => u64::from(*n),
        Value::U32(n) => u64::from(*n),
        Value::U64(n) => *n,
        Value::I32(n) if *n >= 0 => *n as u64,
        Value::I64(n) if *n >= 0 => *n as u64,
        other => return Err(LoadError::Metadata(format!("`{key}` is not a count: {other:?}"))),
    };
    usize::try_from(number).map_err(|_| LoadError::Metadata(format!("`{key}` = {number} is too large")))
}

fn metadata_f32(content: &Content, key: &str) -> Result<f32, LoadError> {
    match metadata(content, key)? {
        Value::F32(n) => Ok(*n),
        Value::F64(n) => Ok(*n as f32),
        other => Err(LoadError::Metadata(format!("`{key}` is not a number: {other:?}"))),
    }
}

impl Shape {
    pub fn from_metadata(content: &Content) -> Result<Self, LoadError> {
        let architecture = match metadata(content, "general.architecture")? {
            Value::String(name) => name.clone(),
            other => return Err(LoadError::Metadata(format!("`general.architecture` is not a string: {other:?}"))),
        };
        if !SUPPORTED_ARCHITECTURES.contains(&architecture.as_str()) {
            return Err(LoadError::Unsupported(format!(
                "architecture `{architecture}`; supported: {}",
                SUPPORTED_ARCHITECTURES.join(", ")
            )));
        }
        let key = |name: &str| format!("{architecture}.{name}");
        if content.metadata.get(&key("expert_count")).is_some_and(|count| count.to_u32().is_ok_and(|n| n > 1)) {
            return Err(LoadError::Unsupported("mixture-of-experts models".to_owned()));
        }
        let embedding = metadata_usize(content, &key("embedding_length"))?;
        let heads = metadata_usize(content, &key("attention.head_count"))?;
        let kv_heads = metadata_usize(content, &key("attention.head_count_kv")).unwrap_or(heads);
        if heads == 0 || kv_heads == 0 || embedding % heads != 0 || heads % kv_heads != 0 {
            return Err(LoadError::Metadata(format!(
                "{heads} attention heads and {kv_heads} key/value heads do not divide an embedding of {embedding}"
            )));
        }
        let head_dim = embedding / heads;
        let rope_dims = metadata_usize(content, &key("rope.dimension_count")).unwrap_or(head_dim);
        if rope_dims != head_dim {
            return Err(LoadError::Unsupported(format!("partial rotary embeddings ({rope_dims} of {head_dim})")));
        }
        let vocab = match metadata(content, "tokenizer.ggml.tokens")? {
            Value::Array(tokens) => tokens.len(),
            _ => return Err(LoadError::Metadata("`tokenizer.ggml.tokens` is not an array".to_owned())),
        };
        Ok(Shape {
            layers: metadata_usize(content, &key("block_count"))?,
            embedding,
            heads,
            kv_heads,
            head_dim,
            norm_eps: metadata_f32(content, &key("attention.layer_norm_rms_epsilon"))?,
            rope_base: metadata_f32(content, &key("rope.freq_base")).unwrap_or(10_000.0),
            rope_neox: architecture == "qwen2",
            // The rotary tables are precomputed for the whole context; 32K bounds their size.
            context: metadata_usize(content, &key("context_length")).unwrap_or(2048).min(32_768),
            vocab,
            architecture,
        })
    }
}

/// Bytes the weights would take expanded to f32.
pub fn f32_bytes(content: &Content) -> u64 {
    content.tensor_infos.values().map(|info| info.shape.elem_count() as u64 * 4).sum()
}

struct Loader<'a, R> {
    content: &'a Content,
    reader: &'a mut R,
    device: &'a Device,
    f32_weights: bool,
}

impl<R: std::io::Read + std::io::Seek> Loader<'_, R> {
    fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    fn tensor(&mut self, name: &str) -> Result<Tensor, LoadError> {
        let tensor =
            self.content.tensor(self.reader, name, self.device).map_err(|error| LoadError::tensor(name, error))?;
        tensor.dequantize(self.device).map_err(|error| LoadError::tensor(name, error))
    }

    fn matmul(&mut self, name: &str) -> Result<QMatMul, LoadError> {
        let tensor =
            self.content.tensor(self.reader, name, self.device).map_err(|error| LoadError::tensor(name, error))?;
        let expand = self.f32_weights || matches!(tensor.dtype(), GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16);
        if expand {
            let weights = tensor.dequantize(self.device).map_err(|error| LoadError::tensor(name, error))?;
            Ok(QMatMul::Tensor(weights))
        } else {
            // `QMatMul::QTensor` directly: `from_qtensor` would consult candle's
            // `CANDLE_DEQUANTIZE_ALL` environment variable behind the config's back.
            Ok(QMatMul::QTensor(std::sync::Arc::new(tensor)))
        }
    }

    fn optional(&mut self, name: &str) -> Result<Option<Tensor>, LoadError> {
        if self.has(name) { self.tensor(name).map(Some) } else { Ok(None) }
    }
}

impl Transformer {
    pub fn load<R: std::io::Read + std::io::Seek>(
        content: &Content,
        reader: &mut R,
        shape: Shape,
        f32_weights: bool,
    ) -> Result<Self, LoadError> {
        let device = Device::Cpu;
        let mut loader = Loader { content, reader, device: &device, f32_weights };
        let embedding = loader.tensor("token_embd.weight")?;
        if embedding.dims() != [shape.vocab, shape.embedding] {
            return Err(LoadError::Metadata(format!(
                "`token_embd.weight` is {:?}, expected [{}, {}]",
                embedding.dims(),
                shape.vocab,
                shape.embedding
            )));
        }
        // Tied embeddings (SmolLM2, Qwen2 small models) reuse the expanded embedding.
        let output = if loader.has("output.weight") {
            loader.matmul("output.weight")?
        } else {
            QMatMul::Tensor(embedding.clone())
        };
        let final_norm = loader.tensor("output_norm.weight")?;
        let mut layers = Vec::with_capacity(shape.layers);
        for index in 0..shape.layers {
            let name = |part: &str| format!("blk.{index}.{part}");
            layers.push(Layer {
                attention_norm: loader.tensor(&name("attn_norm.weight"))?,
                query: loader.matmul(&name("attn_q.weight"))?,
                key: loader.matmul(&name("attn_k.weight"))?,
                value: loader.matmul(&name("attn_v.weight"))?,
                query_bias: loader.optional(&name("attn_q.bias"))?,
                key_bias: loader.optional(&name("attn_k.bias"))?,
                value_bias: loader.optional(&name("attn_v.bias"))?,
                attention_output: loader.matmul(&name("attn_output.weight"))?,
                ffn_norm: loader.tensor(&name("ffn_norm.weight"))?,
                gate: loader.matmul(&name("ffn_gate.weight"))?,
                up: loader.matmul(&name("ffn_up.weight"))?,
                down: loader.matmul(&name("ffn_down.weight"))?,
            });
        }
        let (cos, sin) = rotary_tables(&shape, &device).map_err(|error| LoadError::tensor("rotary tables", error))?;
        Ok(Transformer { shape, embedding, layers, final_norm, output, cos, sin, device, f32_weights })
    }

    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    pub fn f32_weights(&self) -> bool {
        self.f32_weights
    }

    /// Feeds `tokens` after the tokens already in `cache`, extends the cache, and returns
    /// log-probabilities `(positions, vocab)` for the positions `which` asks for.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache, which: Logits) -> candle_core::Result<Tensor> {
        let start = cache.len;
        let count = tokens.len();
        if count == 0 {
            candle_core::bail!("no tokens to feed");
        }
        if start + count > self.shape.context {
            candle_core::bail!("{} tokens exceed the context of {}", start + count, self.shape.context);
        }
        let mask = if count > 1 { Some(causal_mask(count, start, &self.device)?) } else { None };
        let cos = self.cos.narrow(0, start, count)?;
        let sin = self.sin.narrow(0, start, count)?;
        self.run(tokens, cache, mask.as_ref(), &cos, &sin, which)
    }

    /// Scores several continuations of the same cached state in one pass (the weights are read
    /// once instead of once per continuation). Every branch sits at the positions right after
    /// the cache and sees only the cache and its own earlier tokens. Returns, per branch, the
    /// log-probabilities `(branch length, vocab)`: row `i` predicts the token after `branch[i]`.
    /// The cache is left as it was.
    pub fn forward_branches(&self, branches: &[&[u32]], cache: &KvCache) -> candle_core::Result<Vec<Tensor>> {
        let start = cache.len;
        let longest = branches.iter().map(|branch| branch.len()).max().unwrap_or(0);
        if branches.iter().any(|branch| branch.is_empty()) {
            candle_core::bail!("an empty branch");
        }
        if start + longest > self.shape.context {
            candle_core::bail!("{} tokens exceed the context of {}", start + longest, self.shape.context);
        }
        let tokens: Vec<u32> = branches.iter().flat_map(|branch| branch.iter().copied()).collect();
        let positions: Vec<u32> =
            branches.iter().flat_map(|branch| (0..branch.len()).map(|offset| (start + offset) as u32)).collect();
        let owners: Vec<(usize, usize)> = branches
            .iter()
            .enumerate()
            .flat_map(|(index, branch)| (0..branch.len()).map(move |offset| (index, offset)))
            .collect();
        let count = tokens.len();
        let width = start + count;
        let mut mask = vec![0f32; count * width];
        for (row, (branch, offset)) in owners.iter().enumerate() {
            for (column, (other_branch, other_offset)) in owners.iter().enumerate() {
                if other_branch != branch || other_offset > offset {
                    mask[row * width + start + column] = f32::NEG_INFINITY;
                }
            }
        }
        let mask = Tensor::from_vec(mask, (count, width), &self.device)?;
        let positions = Tensor::new(positions.as_slice(), &self.device)?;
        let cos = self.cos.index_select(&positions, 0)?;
        let sin = self.sin.index_select(&positions, 0)?;
        let mut scratch = cache.clone();
        let rows = self.run(&tokens, &mut scratch, Some(&mask), &cos, &sin, Logits::All)?;
        let mut offset = 0;
        let mut split = Vec::with_capacity(branches.len());
        for branch in branches {
            split.push(rows.narrow(0, offset, branch.len())?);
            offset += branch.len();
        }
        Ok(split)
    }

    /// The residual stream after the first `layers` decoder layers for `tokens` read from the
    /// start (no cache), as `(tokens, embedding)` f32. The trained-head screen reads a middle
    /// layer, so the layers after it are never run: the pass costs `layers / total` of a full one.
    pub fn hidden_states(&self, tokens: &[u32], layers: usize) -> candle_core::Result<Tensor> {
        let count = tokens.len();
        if count == 0 {
            candle_core::bail!("no tokens to feed");
        }
        if count > self.shape.context {
            candle_core::bail!("{count} tokens exceed the context of {}", self.shape.context);
        }
        if layers == 0 || layers > self.layers.len() {
            candle_core::bail!("layer {layers} is not one of the model's 1..={} layers", self.layers.len());
        }
        let mask = if count > 1 { Some(causal_mask(count, 0, &self.device)?) } else { None };
        let cos = self.cos.narrow(0, 0, count)?;
        let sin = self.sin.narrow(0, 0, count)?;
        let ids = Tensor::new(tokens, &self.device)?;
        let mut hidden = self.embedding.index_select(&ids, 0)?.unsqueeze(0)?;
        for layer in &self.layers[..layers] {
            hidden = self.layer(layer, hidden, None, mask.as_ref(), &cos, &sin)?.0;
        }
        hidden.squeeze(0)?.to_dtype(DType::F32)
    }

    /// One decoder layer: attention and feed-forward, each added to the residual stream.
    /// Returns the new stream and the layer's keys and values (past ones included).
    fn layer(
        &self,
        layer: &Layer,
        hidden: Tensor,
        past: Option<&(Tensor, Tensor)>,
        mask: Option<&Tensor>,
        cos: &Tensor,
        sin: &Tensor,
    ) -> candle_core::Result<(Tensor, (Tensor, Tensor))> {
        let normed = candle_nn::ops::rms_norm(&hidden, &layer.attention_norm, self.shape.norm_eps)?;
        let (attended, keys, values) = self.attention(layer, &normed, past, mask, cos, sin)?;
        let hidden = (hidden + attended)?;
        let normed = candle_nn::ops::rms_norm(&hidden, &layer.ffn_norm, self.shape.norm_eps)?;
        let activated = (candle_nn::ops::silu(&layer.gate.forward(&normed)?)? * layer.up.forward(&normed)?)?;
        let hidden = (hidden + layer.down.forward(&activated)?)?;
        Ok((hidden, (keys, values)))
    }

    fn run(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        mask: Option<&Tensor>,
        cos: &Tensor,
        sin: &Tensor,
        which: Logits,
    ) -> candle_core::Result<Tensor> {
        let count = tokens.len();
        let ids = Tensor::new(tokens, &self.device)?;
        let mut hidden = self.embedding.index_select(&ids, 0)?.unsqueeze(0)?;
        let mut new_layers = Vec::with_capacity(self.layers.len());
        for (index, layer) in self.layers.iter().enumerate() {
            let (next, state) = self.layer(layer, hidden, cache.layers.get(index), mask, cos, sin)?;
            new_layers.push(state);
            hidden = next;
        }
        cache.len += count;
        cache.layers = new_layers;
        let hidden = match which {
            Logits::Last => hidden.narrow(1, count - 1, 1)?,
            Logits::All => hidden,
        };
        let hidden = candle_nn::ops::rms_norm(&hidden, &self.final_norm, self.shape.norm_eps)?;
        let logits = self.output.forward(&hidden)?.squeeze(0)?.to_dtype(DType::F32)?;
        candle_nn::ops::log_softmax(&logits, D::Minus1)
    }

    fn attention(
        &self,
        layer: &Layer,
        input: &Tensor,
        past: Option<&(Tensor, Tensor)>,
        mask: Option<&Tensor>,
        cos: &Tensor,
        sin: &Tensor,
    ) -> candle_core::Result<(Tensor, Tensor, Tensor)> {
        let shape = &self.shape;
        let (batch, count, _) = input.dims3()?;
        let project = |weights: &QMatMul, bias: &Option<Tensor>, heads: usize| -> candle_core::Result<Tensor> {
            let mut projected = weights.forward(input)?;
            if let Some(bias) = bias {
                projected = projected.broadcast_add(bias)?;
            }
            projected.reshape((batch, count, heads, shape.head_dim))?.transpose(1, 2)?.contiguous()
        };
        let rotate = |x: Tensor| {
            if shape.rope_neox {
                candle_nn::rotary_emb::rope(&x, cos, sin)
            } else {
                candle_nn::rotary_emb::rope_i(&x, cos, sin)
            }
        };
        // Scaled before the product: the query is far smaller than the score matrix.
        let query = (rotate(project(&layer.query, &layer.query_bias, shape.heads)?)? / (shape.head_dim as f64).sqrt())?;
        let key = rotate(project(&layer.key, &layer.key_bias, shape.kv_heads)?)?;
        let value = project(&layer.value, &layer.value_bias, shape.kv_heads)?;
        let (keys, values) = match past {
            Some((past_keys, past_values)) => {
                (Tensor::cat(&[past_keys, &key], 2)?, Tensor::cat(&[past_values, &value], 2)?)
            }
            None => (key, value),
        };
        // Grouped-query attention without copying keys and values per query head: the query
        // heads that share a key/value head (consecutive, as in llama.cpp and transformers)
        // are stacked as extra rows of one product.
        let groups = shape.heads / shape.kv_heads;
        let length = keys.dim(2)?;
        let stacked = query.reshape((batch, shape.kv_heads, groups * count, shape.head_dim))?;
        let scores = stacked.matmul(&keys.t()?)?;
        let scores = match mask {
            Some(mask) => scores
                .reshape((batch, shape.kv_heads, groups, count, length))?
                .broadcast_add(mask)?
                .reshape((batch, shape.kv_heads, groups * count, length))?,
            None => scores,
        };
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let attended = weights.matmul(&values)?;
        let attended = attended.reshape((batch, shape.heads, count, shape.head_dim))?.transpose(1, 2)?.reshape((
            batch,
            count,
            shape.heads * shape.head_dim,
        ))?;
        Ok((layer.attention_output.forward(&attended)?, keys, values))
    }
}

/// Additive mask `(count, start + count)`: position `start + i` sees keys `0..=start + i`.
fn causal_mask(count: usize, start: usize, device: &Device) -> candle_core::Result<Tensor> {
    let width = start + count;
    let values: Vec<f32> = (0..count)
        .flat_map(|row| (0..width).map(move |column| if column > start + row { f32::NEG_INFINITY } else { 0.0 }))
        .collect();
    Tensor::from_vec(values, (count, width), device)
}

fn rotary_tables(shape: &Shape, device: &Device) -> candle_core::Result<(Tensor, Tensor)> {
    let half = shape.head_dim / 2;
    let inverse: Vec<f32> =
        (0..half).map(|i| 1.0 / shape.rope_base.powf((2 * i) as f32 / shape.head_dim as f32)).collect();
    let inverse = Tensor::from_vec(inverse, (1, half), device)?;
    let positions =
        Tensor::arange(0u32, shape.context as u32, device)?.to_dtype(DType::F32)?.reshape((shape.context, 1))?;
    let angles = positions.matmul(&inverse)?;
    Ok((angles.cos()?, angles.sin()?))
}
