// etensor's training layer, on top of et/et.hpp: modules (et::nn::Module, Linear, Conv2d,
// BatchNorm2d, Embedding, LSTM, activations, Dropout, pooling, Flatten, Sequential), weight
// initialization (et::nn::init), safetensors save/load, mixed precision (et::amp) and data
// (et::data: the loader, IDX files, token files).
// A header of its own so that files which only compute do not compile it.
#pragma once

// First, as in et.hpp: a device-mix error is then introduced by two include lines.
#include "et/device_mismatch.hpp"
#include "et/et.hpp"
#include "et/amp/autocast.hpp"
#include "et/amp/grad_scaler.hpp"
#include "et/data/idx.hpp"
#include "et/data/loader.hpp"
#include "et/data/tokens.hpp"
#include "et/nn/activations.hpp"
#include "et/nn/attention.hpp"
#include "et/nn/clip.hpp"
#include "et/nn/init.hpp"
#include "et/nn/layers.hpp"
#include "et/nn/lstm.hpp"
#include "et/nn/module.hpp"
#include "et/nn/serialize.hpp"
